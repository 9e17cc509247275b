/**
 * `Retry-After` read one way, for the deliverer (a receiver's 429 or 503) and the upstream
 * adapters (a provider's): delay-seconds or an HTTP date, anything else is not a wait.
 */
import { describe, expect, it } from "@effect/vitest"
import { RetryAfter } from "@mediagate/core"

describe("RetryAfter", () => {
  const now = Date.UTC(2030, 0, 1)
  it("delay-seconds, or an HTTP date after now (0 once past); absent, empty or anything else is no wait", () => {
    expect(RetryAfter.millis("120", now)).toBe(120_000)
    expect(RetryAfter.millis(" 0 ", now)).toBe(0)
    expect(RetryAfter.millis(new Date(now + 90_000).toUTCString(), now)).toBe(90_000)
    expect(RetryAfter.millis(new Date(now - 90_000).toUTCString(), now)).toBe(0)
    for (const value of [undefined, "", "  ", "soon", "-5", "1.5", "12 34", "2030-01-02"]) {
      expect(RetryAfter.millis(value, now), String(value)).toBeUndefined()
    }
  })
})
