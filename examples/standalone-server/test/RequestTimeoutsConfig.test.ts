/**
 * MEDIAGATE_HEADERS_TIMEOUT and MEDIAGATE_BODY_TIMEOUT: 10 s each by default, durations
 * from 100 ms to 5 m, and node's deadlines on the standalone server's node:http server.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Either } from "effect"
import { createServer } from "node:http"
import { configErrorLines, serverConfig } from "../src/Config.js"
import { RequestTimeouts } from "@mediagate/http"

const read = (env: Record<string, string>) =>
  Effect.either(Effect.withConfigProvider(serverConfig, ConfigProvider.fromMap(new Map(Object.entries(env)))))

const timeouts = (env: Record<string, string>) =>
  Effect.map(read(env), Either.match({
    onLeft: configErrorLines,
    onRight: ({ requestTimeouts }) => [Duration.toMillis(requestTimeouts.headers), Duration.toMillis(requestTimeouts.body)]
  }))

describe("the request deadlines", () => {
  it.effect("10 s each by default; durations from 100ms to 5m", () =>
    Effect.gen(function*() {
      expect(yield* timeouts({})).toEqual([10_000, 10_000])
      expect(yield* timeouts({ MEDIAGATE_HEADERS_TIMEOUT: "500ms", MEDIAGATE_BODY_TIMEOUT: "2m" })).toEqual([500, 120_000])
      const rule = (name: string, got: string) => `${name} must be a duration from 100ms to 5m, such as 500ms, 10s or 2m (got "${got}")`
      expect(yield* timeouts({ MEDIAGATE_HEADERS_TIMEOUT: "50ms" })).toEqual([rule("MEDIAGATE_HEADERS_TIMEOUT", "50ms")])
      expect(yield* timeouts({ MEDIAGATE_BODY_TIMEOUT: "6m" })).toEqual([rule("MEDIAGATE_BODY_TIMEOUT", "6m")])
    }))

  it("node's deadlines: the headers', and the whole request's a second past both, checked often enough", () => {
    const server = RequestTimeouts.applyTo(createServer(), { headers: Duration.seconds(10), body: Duration.seconds(10) })
    expect([server.headersTimeout, server.requestTimeout]).toEqual([10_000, 21_000])
    expect((server as unknown as { connectionsCheckingInterval: number }).connectionsCheckingInterval).toBe(1_000)
    const defaults = RequestTimeouts.applyTo(createServer())
    expect([defaults.headersTimeout, defaults.requestTimeout]).toEqual([10_000, 21_000])
  })
})
