/**
 * What the admin API's suites share: the admin key the test server is given, a client that
 * sends it, and a check that an answer is what the OpenAPI document says for its operation.
 */
import { expect } from "@effect/vitest"
import { Ajv } from "ajv"
import { Effect } from "effect"
import type { Answer } from "./support.js"
import { client } from "./support.js"

/** The admin key the test server is given as configuration (MEDIAGATE_ADMIN_KEY). */
export const adminKey = "mga_test_admin_key_0123456789abcdefghij"

/** Its id, as the audit log names its actor. */
export const adminActor = "admin_key:adk_configured"

/** The admin API, called with the admin key. */
export const admin = client(adminKey)

let document: unknown

/**
 * Checks that the document declares the answer's status for the operation, with a schema the
 * body fits; answers the answer.
 */
export const documented = (path: string, method: "get" | "post") => (answer: Answer) =>
  Effect.gen(function*() {
    document ??= (yield* admin.call("GET", "/openapi.json", { key: null })).body
    const ajv = new Ajv({ strict: false, validateFormats: false })
    ajv.addSchema({ ...(document as object), $id: "openapi" })
    const pointer = ["paths", path, method, "responses", String(answer.status), "content", "application/json", "schema"]
      .map((segment) => encodeURIComponent(segment.replace(/~/g, "~0").replace(/\//g, "~1"))).join("/")
    const valid = ajv.validate({ $ref: `openapi#/${pointer}` }, answer.body)
    expect({ path, method, status: answer.status, body: answer.body, errors: valid ? null : ajv.errorsText() })
      .toEqual({ path, method, status: answer.status, body: answer.body, errors: null })
    return answer
  })

/** An error answer in the envelope: its status, code and message. */
export const expectError = (answer: Answer, code: number, msg: string | RegExp) => {
  expect(answer.status).toBe(code)
  expect(answer.body).toEqual({ code, msg: typeof msg === "string" ? msg : expect.stringMatching(msg) })
}
