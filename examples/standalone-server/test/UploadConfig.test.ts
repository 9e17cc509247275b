/** The upload variables of the standalone server: defaults, values, and one line per bad value. */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Either, Option } from "effect"
import { configErrorLines, serverConfig } from "../src/Config.js"

const read = (env: Record<string, string>) =>
  Effect.either(Effect.withConfigProvider(serverConfig, ConfigProvider.fromMap(new Map(Object.entries(env)))))

describe("MEDIAGATE_UPLOAD_*", () => {
  it.effect("defaults: 50,000,000 bytes, 24 hours, 1 upload a second per account with bursts of 10", () =>
    Effect.gen(function*() {
      const { uploads } = Either.getOrThrow(yield* read({}))
      expect(uploads?.maxBytes).toBe(50_000_000)
      expect(Duration.toMillis(uploads!.retention)).toBe(86_400_000)
      expect(uploads?.rate).toEqual(Option.some({ perSecond: 1, burst: 10 }))
    }))

  it.effect("values are taken; off turns the upload rate off", () =>
    Effect.gen(function*() {
      const env = { MEDIAGATE_UPLOAD_MAX_BYTES: "1000000", MEDIAGATE_UPLOAD_RETENTION: "2h", MEDIAGATE_UPLOAD_RATE_LIMIT: "off" }
      const { uploads } = Either.getOrThrow(yield* read(env))
      expect([uploads?.maxBytes, Duration.toMillis(uploads!.retention), uploads?.rate]).toEqual([1_000_000, 7_200_000, Option.none()])
      expect(Either.getOrThrow(yield* read({ MEDIAGATE_UPLOAD_RATE_LIMIT: "3" })).uploads?.rate).toEqual(Option.some({ perSecond: 3, burst: 30 }))
    }))

  it.effect("a bad value is one line naming the variable and the rule", () =>
    Effect.gen(function*() {
      for (const [name, value, rule] of [
        ["MEDIAGATE_UPLOAD_MAX_BYTES", "0", "must be a whole number from 1 to 1000000000"],
        ["MEDIAGATE_UPLOAD_RETENTION", "10s", "must be a duration from 1m to 3650d"],
        ["MEDIAGATE_UPLOAD_RATE_LIMIT", "fast", "must be uploads a second per account, a whole number from 1, or off"]
      ] as const) {
        const lines = Either.match(yield* read({ [name]: value }), { onLeft: configErrorLines, onRight: () => [] })
        expect(lines).toEqual([expect.stringContaining(`${name} ${rule}`)])
      }
    }))
})
