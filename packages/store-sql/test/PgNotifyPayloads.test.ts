/**
 * The payloads of PgNotify's task changes: the node's id, then task ids, each payload within
 * the bytes PostgreSQL takes, every id in one of them.
 */
import { describe, expect, it } from "@effect/vitest"
import { PgNotify } from "../src/index.js"

const ids = (n: number) => Array.from({ length: n }, (_, i) => `0190c8a4-0000-7000-8000-${i.toString().padStart(12, "0")}`)

describe("PgNotify.changePayloads", () => {
  it("a few ids go in one payload after the node's id", () => {
    expect(PgNotify.changePayloads("node-1", ids(2))).toEqual([`node-1 ${ids(2).join(" ")}`])
    expect(PgNotify.changePayloads("node-1", [])).toEqual([])
  })

  it("many ids are split into payloads within the limit, each starting with the node's id", () => {
    const payloads = PgNotify.changePayloads("node-1", ids(1000))
    expect(payloads.length).toBe(5)
    for (const payload of payloads) {
      expect(Buffer.byteLength(payload)).toBeLessThanOrEqual(PgNotify.maxPayloadBytes)
      expect(payload.startsWith("node-1 ")).toBe(true)
    }
    expect(payloads.flatMap((payload) => payload.split(" ").slice(1))).toEqual(ids(1000))
  })
})
