import { describe, expect, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { ApiKeys, Ids } from "../src/index.js"

describe("ApiKeys", () => {
  it.effect("generated keys have the scanner's shape and a checksum that holds; each is new", () =>
    Effect.gen(function*() {
      const keys = new Set<string>()
      for (let i = 0; i < 200; i++) {
        const key = Redacted.value(yield* ApiKeys.generate)
        expect(key).toMatch(ApiKeys.generatedPattern)
        expect(key).toHaveLength(41)
        expect(ApiKeys.classify(key)).toBe("generated")
        keys.add(key)
      }
      expect(keys.size).toBe(200)
    }).pipe(Effect.provide(Ids.layer)))

  it.effect("a mistyped generated key is malformed: one character changed, swapped, dropped or added", () =>
    Effect.gen(function*() {
      const key = Redacted.value(yield* ApiKeys.generate)
      const flip = (at: number) => key.slice(0, at) + (key[at] === "a" ? "b" : "a") + key.slice(at + 1)
      for (const at of [3, 10, 20, 34, 35, 40]) expect(ApiKeys.classify(flip(at))).toBe("malformed")
      expect(ApiKeys.classify(key.slice(0, 5) + key[6] + key[5] + key.slice(7))).toBe(key[5] === key[6] ? "generated" : "malformed")
      // One character fewer or more is no longer the generated shape: taken as given, and found by no hash.
      expect(ApiKeys.classify(key.slice(0, -1))).toBe("given")
      expect(ApiKeys.classify("")).toBe("malformed")
    }).pipe(Effect.provide(Ids.layer)))

  it("keys brought as given, and keys made before this format, are taken as they are", () => {
    expect(ApiKeys.classify("my-own-operator-key")).toBe("given")
    expect(ApiKeys.classify(`mg_${"0123456789abcdef".repeat(3)}`)).toBe("given")
  })

  it("a checksum known from outside: CRC-32 of the head, in base62", () => {
    // CRC-32 ("123456789") is 0xCBF43926, the standard check value.
    expect(ApiKeys.crc32("123456789")).toBe(0xcbf43926)
    const head = `mg_${"A".repeat(32)}`
    expect(ApiKeys.classify(head + ApiKeys.checksum(head))).toBe("generated")
  })

  it("hints show a few characters only; hashes compare equal only when equal", () => {
    expect(ApiKeys.hint(`mg_Abcd${"x".repeat(34)}`)).toBe("mg_Abcd...")
    expect(ApiKeys.hint("operator-key-0123456789")).toBe("oper...")
    expect(ApiKeys.hint("short")).toBe("s...")
    expect([ApiKeys.sameHash("ab12", "ab12"), ApiKeys.sameHash("ab12", "ab13"), ApiKeys.sameHash("ab", "abc")]).toEqual([true, false, false])
  })

  it("a key's state: revoked wins, then expiry at its time", () => {
    expect(ApiKeys.stateOf({ revokedAt: null, expiresAt: null }, 5)).toBe("active")
    expect(ApiKeys.stateOf({ revokedAt: null, expiresAt: 5 }, 4)).toBe("active")
    expect(ApiKeys.stateOf({ revokedAt: null, expiresAt: 5 }, 5)).toBe("expired")
    expect(ApiKeys.stateOf({ revokedAt: 1, expiresAt: 5 }, 4)).toBe("revoked")
  })
})
