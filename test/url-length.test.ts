/**
 * URLs a client gives are at most 2,048 characters, from outside over HTTP: at the limit a
 * submit is accepted, one character more is refused with 400 naming the field and the rule
 * and nothing is created; the catalog and the OpenAPI document publish the limit as
 * maxLength. The server has no engine, so nothing is ever fetched or called back.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { SubmitBody } from "./support.js"
import { client, idleServer } from "./support.js"

const limit = 2048

/** A public https URL of exactly `length` characters. */
const urlOf = (length: number) => {
  const base = "https://example.com/media/"
  return `${base}${"a".repeat(length - base.length)}`
}

const api = client()

/** Where a URL can sit in a submit, each with a request putting `url` there and the field as messages name it. */
const fields: ReadonlyArray<readonly [string, (url: string) => SubmitBody, string]> = [
  ["callBackUrl", (url) => ({ model: "alpha-image-2/text-to-image", input: { prompt: "a kite" }, callBackUrl: url }), "callBackUrl"],
  [
    "alpha-image-2 imageUrls",
    (url) => ({ model: "alpha-image-2/image-to-image", input: { prompt: "a kite", imageUrls: [url] } }),
    "input.imageUrls[0]"
  ],
  [
    "motion mediaUrls",
    (url) => ({ model: "motion-2.0", input: { prompt: "it moves", duration: 5, mediaUrls: ["https://example.com/a.png", url] } }),
    "input.mediaUrls[1]"
  ],
  ["canvas images", (url) => ({ model: "canvas-4.6", input: { prompt: "a kite", images: [url] } }), "input.images[0]"],
  [
    "canvas-video imageUrls",
    (url) => ({ model: "canvas-video-3.0", input: { prompt: "a kite", imageUrls: [url] } }),
    "input.imageUrls[0]"
  ]
]

describe("the URL length limit over HTTP", () => {
  it.effect.each(fields)("%s: 2048 characters are accepted, 2049 refused with 400 naming the field and the rule", ([, request, field]) =>
    Effect.gen(function*() {
      const model = request("").model
      const accepted = yield* api.submit(request(urlOf(limit)))
      expect(accepted.status).toBe(200)
      const refused = yield* api.submit(request(urlOf(limit + 1)))
      const forModel = field === "callBackUrl" ? "" : ` for ${model}`
      expect(refused).toEqual({ status: 400, body: { code: 400, msg: `${field} must be at most ${limit} characters${forModel}` } })
      // Only the accepted submit made a task.
      const listed = yield* api.call("GET", "/api/v1/tasks")
      expect(listed.body.data.tasks.map((task: { taskId: string }) => task.taskId)).toEqual([accepted.body.data.taskId])
    }).pipe(Effect.provide(idleServer)))

  it.effect("the catalog's JSON Schemas give every URL field maxLength 2048", () =>
    Effect.gen(function*() {
      const answer = yield* api.call("GET", "/api/v1/models")
      expect(answer.status).toBe(200)
      const models = answer.body.data.models as ReadonlyArray<{ id: string; inputSchema: { properties: Record<string, any> } }>
      const urlFields = models.flatMap((model) =>
        Object.entries(model.inputSchema.properties)
          .filter(([, property]) => property.type === "array" && property.items?.format === "uri")
          .map(([name, property]) => [model.id, name, property.items.maxLength] as const)
      )
      // Every model that takes media (most of the catalog) has such a field.
      expect(new Set(urlFields.map(([id]) => id)).size).toBeGreaterThan(20)
      expect(urlFields.filter(([, , maxLength]) => maxLength !== limit)).toEqual([])
      for (const [id, field] of [["alpha-image-2/image-to-image", "imageUrls"], ["motion-2.0", "mediaUrls"], ["canvas-4.6", "images"]]) {
        expect(urlFields).toContainEqual([id, field, limit])
      }
    }).pipe(Effect.provide(idleServer)))

  it.effect("the OpenAPI document gives callBackUrl maxLength 2048", () =>
    Effect.gen(function*() {
      const answer = yield* api.call("GET", "/openapi.json", { key: null })
      const callBackUrl = answer.body.components.schemas.SubmitRequest.properties.callBackUrl
      expect(callBackUrl.anyOf).toContainEqual(expect.objectContaining({ type: "string", format: "uri", maxLength: limit }))
    }).pipe(Effect.provide(idleServer)))
})
