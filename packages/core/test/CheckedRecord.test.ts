/**
 * `Task.checkedRecord` makes what `new TaskRecord(fields)` makes, its defaults included, and
 * refuses what the constructor refuses, with its check compiled once.
 */
import { describe, expect, it } from "@effect/vitest"
import { ParseResult } from "effect"
import { Task } from "../src/index.js"
import * as Testing from "../src/Testing.js"

/** A valid record's fields, as a submit gives them (no attempts, progress or callback events). */
const fields = (): ConstructorParameters<typeof Task.TaskRecord>[0] => {
  const { attempts: _attempts, callbackEvents: _events, keyId: _keyId, progress: _progress, provider: _provider, ...given } = Testing.record({ id: "0190c8a4-0000-7000-8000-000000000001" })
  return given
}

describe("Task.checkedRecord", () => {
  it("the same record as the constructor, defaults included", () => {
    const checked = Task.checkedRecord(fields())
    expect(checked).toBeInstanceOf(Task.TaskRecord)
    expect(checked).toEqual(new Task.TaskRecord(fields()))
    expect([checked.attempts, checked.provider, checked.progress, checked.callbackEvents, checked.keyId]).toEqual([[], null, null, null, null])
  })

  const broken: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
    ["a version that is no integer", { version: 1.5 }],
    ["an unknown status", { status: "NOPE" }],
    ["a job without its model", { job: { ...fields().job, model: undefined } }],
    ["an input that is no object", { input: "a lighthouse" }],
    ["a callback URL that is no string", { callBackUrl: 42 }]
  ]
  for (const [name, change] of broken) {
    it(`refuses ${name}, as the constructor does`, () => {
      const given = { ...fields(), ...change } as ConstructorParameters<typeof Task.TaskRecord>[0]
      expect(() => new Task.TaskRecord(given)).toThrow()
      expect(() => Task.checkedRecord(given)).toThrow(ParseResult.ParseError)
    })
  }
})
