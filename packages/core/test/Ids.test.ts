/**
 * Task ids are UUIDv7 (RFC 9562) stamped with the time of Effect's Clock, so TestClock
 * pins them and they sort by creation.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Random, TestClock } from "effect"
import { Ids } from "../src/index.js"

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** The 48-bit millisecond timestamp at the front of a UUIDv7. */
const timestampOf = (id: string) => parseInt(id.replace(/-/g, "").slice(0, 12), 16)
/** The version nibble (13th hex digit). */
const versionOf = (id: string) => parseInt(id.replace(/-/g, "")[12]!, 16)
/** The two top bits of the variant byte (17th hex digit). */
const variantBitsOf = (id: string) => parseInt(id.replace(/-/g, "")[16]!, 16) >> 2

describe("Ids.uuidV7 (pure)", () => {
  it("reproduces the RFC 9562 appendix A.6 example", () => {
    // unix_ts_ms 0x017F22E279B0, rand_a 0xCC3, rand_b 0x18C4DC0C0C07398F.
    const random = [0x0c, 0xc3, 0x18, 0xc4, 0xdc, 0x0c, 0x0c, 0x07, 0x39, 0x8f]
    expect(Ids.uuidV7(0x017f22e279b0, random)).toBe("017f22e2-79b0-7cc3-98c4-dc0c0c07398f")
  })

  it("forces version 7 and variant 10 over whatever the random bytes say", () => {
    expect(Ids.uuidV7(0x0190c8a4b2c3, new Array(10).fill(0xff))).toBe("0190c8a4-b2c3-7fff-bfff-ffffffffffff")
    expect(Ids.uuidV7(0, new Array(10).fill(0))).toBe("00000000-0000-7000-8000-000000000000")
  })

  it("lays the millisecond timestamp big-endian into the first 48 bits", () => {
    const id = Ids.uuidV7(1_700_000_000_123, new Array(10).fill(0))
    expect(id).toMatch(UUID)
    expect(timestampOf(id)).toBe(1_700_000_000_123)
    expect(id.startsWith("018bcfe5-687b")).toBe(true)
  })

  it("floors fractional milliseconds and treats negative time as 0", () => {
    expect(timestampOf(Ids.uuidV7(1_000.9, []))).toBe(1_000)
    expect(timestampOf(Ids.uuidV7(-5, []))).toBe(0)
  })

  it("sorts as strings in time order", () => {
    const times = [0, 1, 255, 256, 65_535, 1_700_000_000_000, 1_700_000_000_001, 2 ** 47]
    const ids = times.map((t) => Ids.uuidV7(t, new Array(10).fill(0xab)))
    expect([...ids].sort()).toEqual(ids)
  })
})

describe("Ids.layer's randomness", () => {
  it.effect("is drawn in pools and handed out once: tokens across several pools all differ; one larger than a pool comes whole", () =>
    Effect.gen(function*() {
      const ids = yield* Ids.Ids
      // 1,000 tokens of 12 bytes: three pools of 4 KiB and the start of a fourth.
      const tokens = yield* Effect.forEach(Array.from({ length: 1_000 }), () => ids.token(12))
      expect(tokens.every((token) => /^[0-9a-f]{24}$/.test(token))).toBe(true)
      expect(new Set(tokens).size).toBe(tokens.length)
      const large = yield* ids.token(5_000)
      expect(large).toMatch(/^[0-9a-f]{10000}$/)
      expect(new Set(large.match(/.{24}/g)).size).toBeGreaterThan(400)
    }).pipe(Effect.provide(Ids.layer)))
})

for (const [name, layer] of [["Ids.layer", Ids.layer], ["Ids.layerTest", Ids.layerTest]] as const) {
  describe(name, () => {
    it.effect("taskId is a UUIDv7: version nibble 7, variant bits 10", () =>
      Effect.gen(function*() {
        const ids = yield* Ids.Ids
        for (let i = 0; i < 50; i++) {
          const id = yield* ids.taskId
          expect(id).toMatch(UUID)
          expect(versionOf(id)).toBe(7)
          expect(variantBitsOf(id)).toBe(0b10)
        }
      }).pipe(Effect.provide(layer)))

    it.effect("taskId carries the TestClock's time as its timestamp prefix", () =>
      Effect.gen(function*() {
        const ids = yield* Ids.Ids
        expect(timestampOf(yield* ids.taskId)).toBe(0)
        yield* TestClock.setTime(1_767_225_600_123)
        const id = yield* ids.taskId
        expect(timestampOf(id)).toBe(1_767_225_600_123)
        expect(id.slice(0, 13)).toBe(Ids.uuidV7(1_767_225_600_123, []).slice(0, 13))
      }).pipe(Effect.provide(layer)))

    it.effect("ids increase with time", () =>
      Effect.gen(function*() {
        const ids = yield* Ids.Ids
        yield* TestClock.setTime(1_700_000_000_000)
        const seen: Array<string> = []
        for (const step of ["1 millis", "1 millis", "1 second", "1 hour", "1 day"] as const) {
          seen.push(yield* ids.taskId)
          yield* TestClock.adjust(step)
        }
        seen.push(yield* ids.taskId)
        expect([...seen].sort()).toEqual(seen)
        expect(new Set(seen).size).toBe(seen.length)
      }).pipe(Effect.provide(layer)))

    it.effect("ids in the same millisecond differ", () =>
      Effect.gen(function*() {
        const ids = yield* Ids.Ids
        const batch = yield* Effect.all(Array.from({ length: 100 }, () => ids.taskId))
        expect(new Set(batch).size).toBe(100)
        expect(new Set(batch.map(timestampOf))).toEqual(new Set([0]))
      }).pipe(Effect.provide(layer)))

    it.effect("token(n) is n random bytes as lowercase hex", () =>
      Effect.gen(function*() {
        const ids = yield* Ids.Ids
        expect(yield* ids.token(16)).toMatch(/^[0-9a-f]{32}$/)
        expect(yield* ids.token(1)).toMatch(/^[0-9a-f]{2}$/)
        expect(yield* ids.token(0)).toBe("")
        expect(yield* ids.token(32)).not.toBe(yield* ids.token(32))
      }).pipe(Effect.provide(layer)))
  })
}

describe("Ids ordering", () => {
  it.effect("ids made in the same millisecond sort in the order they were made", () =>
    Effect.gen(function*() {
      const ids = yield* Ids.Ids
      yield* TestClock.setTime(1_700_000_000_000)
      const batch = yield* Effect.all(Array.from({ length: 5000 }, () => ids.taskId))
      expect([...batch].sort()).toEqual(batch)
      expect(new Set(batch).size).toBe(5000)
      yield* TestClock.adjust("1 millis")
      const later = yield* ids.taskId
      expect(later > batch[batch.length - 1]!).toBe(true)
    }).pipe(Effect.provide(Ids.layerTest)))
})

describe("Ids.layerTest determinism", () => {
  it.effect("the same Random seed and time give the same ids and tokens", () =>
    Effect.gen(function*() {
      const draw = Effect.gen(function*() {
        const ids = yield* Ids.Ids
        return [yield* ids.taskId, yield* ids.taskId, yield* ids.token(8)]
      }).pipe(Effect.provide(Ids.layerTest))
      yield* TestClock.setTime(1_700_000_000_000)
      const first = yield* Effect.withRandom(draw, Random.make("seed-1"))
      const second = yield* Effect.withRandom(draw, Random.make("seed-1"))
      const other = yield* Effect.withRandom(draw, Random.make("seed-2"))
      expect(second).toEqual(first)
      expect(other).not.toEqual(first)
    }))
})
