/**
 * MEDIAGATE_HEADERS_TIMEOUT and MEDIAGATE_BODY_TIMEOUT: 10 s each by default, durations
 * from 100 ms to 5 m; MEDIAGATE_UPLOAD_TIMEOUT, 10 m by default, 1 s to 1 h; and node's
 * deadlines on the standalone server's node:http server.
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
    onRight: ({ requestTimeouts }) => [Duration.toMillis(requestTimeouts.headers), Duration.toMillis(requestTimeouts.body), Duration.toMillis(requestTimeouts.upload ?? Duration.zero)]
  }))

describe("the request deadlines", () => {
  it.effect("10 s each by default; durations from 100ms to 5m", () =>
    Effect.gen(function*() {
      expect(yield* timeouts({})).toEqual([10_000, 10_000, 600_000])
      expect(yield* timeouts({ MEDIAGATE_HEADERS_TIMEOUT: "500ms", MEDIAGATE_BODY_TIMEOUT: "2m", MEDIAGATE_UPLOAD_TIMEOUT: "1h" })).toEqual([500, 120_000, 3_600_000])
      const rule = (name: string, got: string) => `${name} must be a duration from 100ms to 5m, such as 500ms, 10s or 2m (got "${got}")`
      expect(yield* timeouts({ MEDIAGATE_HEADERS_TIMEOUT: "50ms" })).toEqual([rule("MEDIAGATE_HEADERS_TIMEOUT", "50ms")])
      expect(yield* timeouts({ MEDIAGATE_BODY_TIMEOUT: "6m" })).toEqual([rule("MEDIAGATE_BODY_TIMEOUT", "6m")])
      expect(yield* timeouts({ MEDIAGATE_UPLOAD_TIMEOUT: "2h" })).toEqual([
        `MEDIAGATE_UPLOAD_TIMEOUT must be a duration from 1s to 1h, such as 500ms, 10s or 2m (got "2h")`
      ])
    }))

  it("node's deadlines: the headers', and the whole request's a second past the headers' and the longest body's (an upload's), checked often enough", () => {
    const server = RequestTimeouts.applyTo(createServer(), { headers: Duration.seconds(10), body: Duration.seconds(10), upload: Duration.seconds(5) })
    expect([server.headersTimeout, server.requestTimeout]).toEqual([10_000, 21_000])
    expect((server as unknown as { connectionsCheckingInterval: number }).connectionsCheckingInterval).toBe(1_000)
    const defaults = RequestTimeouts.applyTo(createServer())
    expect([defaults.headersTimeout, defaults.requestTimeout]).toEqual([10_000, 611_000])
  })
})
