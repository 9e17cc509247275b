/**
 * Per-key rate limits of the standalone server, from outside: a key sending more than its
 * burst at once gets 429 in the envelope with Retry-After and the IETF RateLimit fields;
 * other keys are not affected. (Refilling over time is checked with the test clock in
 * packages/http/test/RateLimit.test.ts.)
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { killAll, startServer, stop } from "./standalone-process.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-ratelimit-"))
afterAll(() => {
  killAll()
  rmSync(dir, { recursive: true, force: true })
})

const key = "mg-rate-limit-test-key"

describe("rate limits", () => {
  it("a key over its burst gets 429 with Retry-After and RateLimit fields; another key is not limited", { timeout: 60_000 }, async () => {
    const server = await startServer({
      MEDIAGATE_DATABASE_URL: "memory",
      MEDIAGATE_API_KEY: key,
      MEDIAGATE_MEDIA_DIR: join(dir, "media"),
      MEDIAGATE_RATE_LIMIT: "2",
      MEDIAGATE_RATE_LIMIT_BURST: "5"
    })
    const query = (bearer: string) =>
      fetch(`${server.url}/api/v1/task/0190c8a4-0000-7000-8000-000000000000`, { headers: { authorization: `Bearer ${bearer}` } })
    const answers = await Promise.all(Array.from({ length: 20 }, () => query(key)))
    const limited = answers.filter((answer) => answer.status === 429)
    // The burst of 5 went through (404: no such task); at 2 a second, at most a couple more did.
    expect(answers.filter((answer) => answer.status === 404).length).toBeGreaterThanOrEqual(5)
    expect(answers.filter((answer) => answer.status === 404).length).toBeLessThanOrEqual(7)
    expect(limited.length).toBeGreaterThanOrEqual(13)
    const first = limited[0]!
    expect(await first.json()).toEqual({ code: 429, msg: "too many requests for this key; slow down" })
    expect(first.headers.get("retry-after")).toBe("1")
    expect(first.headers.get("ratelimit-policy")).toBe(`"per-key";q=2;w=1`)
    expect(first.headers.get("ratelimit")).toBe(`"per-key";r=0;t=1`)
    // Another key has a bucket of its own: a wrong key is still told it is wrong.
    expect((await query("another-key")).status).toBe(401)
    await stop(server, "SIGTERM")
  })
})
