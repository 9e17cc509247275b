import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { Ids } from "../src/index.js"

const uuidV7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

describe("Ids", () => {
  it("uuidV7 lays out the timestamp and sets version and variant", () => {
    const id = Ids.uuidV7(0x0190c8a4b2c3, [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])
    expect(id).toBe("0190c8a4-b2c3-7fff-bfff-ffffffffffff")
  })

  for (const [name, layer] of [["layer", Ids.layer], ["layerTest", Ids.layerTest]] as const) {
    it.effect(`${name}: task ids are UUIDv7 stamped with the Clock's time, increasing with it`, () =>
      Effect.gen(function*() {
        const ids = yield* Ids.Ids
        yield* TestClock.setTime(1_700_000_000_000)
        const first = yield* ids.taskId
        expect(first).toMatch(uuidV7)
        expect(parseInt(first.replace(/-/g, "").slice(0, 12), 16)).toBe(1_700_000_000_000)
        yield* TestClock.adjust("1 millis")
        const second = yield* ids.taskId
        expect(second > first).toBe(true)
        const token = yield* ids.token(16)
        expect(token).toMatch(/^[0-9a-f]{32}$/)
      }).pipe(Effect.provide(layer)))
  }

  it.effect("layerTest is deterministic under the test Random", () =>
    Effect.gen(function*() {
      const ids = yield* Ids.Ids
      const a = yield* ids.token(8)
      expect(a).toMatch(/^[0-9a-f]{16}$/)
      expect(a).not.toBe(yield* ids.token(8))
    }).pipe(Effect.provide(Ids.layerTest)))
})
