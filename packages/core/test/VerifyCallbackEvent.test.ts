/**
 * verifyCallbackEvent, a receiver's check of a callback event: the event is read from the
 * envelope as decoded, the body parsed once; an event this version does not know is none.
 */
import { afterEach, describe, expect, it, vi } from "@effect/vitest"
import { StandardWebhooks, Task, verifyCallbackEvent } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { Either } from "effect"

const secret = StandardWebhooks.secretFromHex("8899aabbccddeeff00112233445566778899aabbccddeeff")
const now = 1_900_000_000_000
const task = Task.toWire(Testing.record({ id: "0190c8a4-0000-7000-8000-0000000000ee", status: "PROCESSING" }))

/** A genuine callback with `event` beside the envelope (left out when undefined). */
const signed = (event: unknown, data: unknown = task) => {
  const body = JSON.stringify({ code: 0, msg: "ok", event, data })
  const headers = { "webhook-id": "msg_event", "webhook-timestamp": String(now / 1000), "webhook-signature": StandardWebhooks.sign(secret, "msg_event", now / 1000, body) }
  return { headers, body }
}

const reasonOf = (result: Either.Either<unknown, { readonly reason: string }>) =>
  Either.match(result, { onLeft: (error) => error.reason, onRight: () => "accepted" })

afterEach(() => {
  vi.restoreAllMocks()
})

describe("verifyCallbackEvent", () => {
  it("answers each event with the task, null when there is none or one it does not know", () => {
    for (const event of ["started", "progress", "completed"] as const) {
      const { body, headers } = signed(event)
      expect(verifyCallbackEvent(secret, headers, body, { now })).toEqual(Either.right({ event, task }))
      expect(verifyCallbackEvent(secret, headers, new TextEncoder().encode(body), { now })).toEqual(Either.right({ event, task }))
    }
    for (const event of [undefined, null, "paused", 42, { name: "completed" }]) {
      const { body, headers } = signed(event)
      expect(verifyCallbackEvent(secret, headers, body, { now }), JSON.stringify(event)).toEqual(Either.right({ event: null, task }))
    }
  })

  it("parses the body once", () => {
    const parse = vi.spyOn(JSON, "parse")
    const { body, headers } = signed("progress")
    expect(Either.isRight(verifyCallbackEvent(secret, headers, body, { now }))).toBe(true)
    expect(parse).toHaveBeenCalledTimes(1)
  })

  it("refuses a genuine body that is not a callback, and a changed event", () => {
    const { body, headers } = signed("completed", { id: "not a task" })
    expect(reasonOf(verifyCallbackEvent(secret, headers, body, { now }))).toBe("InvalidBody")
    const genuine = signed("started")
    const forged = genuine.body.replace("\"started\"", "\"completed\"")
    expect(reasonOf(verifyCallbackEvent(secret, genuine.headers, forged, { now }))).toBe("BadSignature")
  })
})
