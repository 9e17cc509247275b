/**
 * Every URL a client gives (callBackUrl and each media URL field of every model) is at most
 * 2,048 characters: longer is refused at submit naming the field and the rule, and the
 * models' JSON Schemas (the catalog and the OpenAPI document) say so with maxLength.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { Api, Fields, ModelCatalog, ModelInfo, UrlPolicy } from "../src/index.js"

const limit = 2048

/** An https URL of exactly `length` characters. */
const urlOf = (length: number, scheme: "https" | "http" = "https") => {
  const base = `${scheme}://example.com/`
  return `${base}${"a".repeat(length - base.length)}`
}

/**
 * Each media field of each model, with an example input of the model that fills it: its own,
 * or one filling another media field of the model with the URLs moved to this one (motion's
 * imageUrls, another name for mediaUrls).
 */
const cases = ModelCatalog.allModels.flatMap((model) => {
  const fields = Fields.mediaUrlFields(model.inputSchema)
  return fields.map((field) => {
    const own = model.examples.find((example) => Array.isArray(example.input[field]))?.input
    const other = fields.find((name) => model.examples.some((example) => Array.isArray(example.input[name])))
    const moved = other === undefined ? undefined : (() => {
      const { [other]: urls, ...rest } = model.examples.find((example) => Array.isArray(example.input[other]))!.input
      return { ...rest, [field]: urls }
    })()
    return { model, field, example: own ?? moved }
  })
})

/** The input with the field's first URL replaced by `url`. */
const withUrl = (input: Readonly<Record<string, unknown>>, field: string, url: string) => {
  const urls = input[field] as ReadonlyArray<string>
  // http-only fields take https too; https-only ones need it.
  return { ...input, [field]: [url, ...urls.slice(1)] }
}

const message = (result: Either.Either<unknown, { readonly message: string }>) =>
  Either.match(result, { onLeft: (error) => error.message, onRight: () => null })

describe("the URL length limit", () => {
  it("is 2048 characters", () => {
    expect(UrlPolicy.maxUrlLength).toBe(limit)
  })

  it("every media field of every model has an example that fills it", () => {
    expect(cases.length).toBeGreaterThan(10)
    expect(cases.filter((c) => c.example === undefined).map((c) => `${c.model.id} ${c.field}`)).toEqual([])
  })

  it.each(cases.map((c) => [`${c.model.id} ${c.field}`, c] as const))(
    "%s: a URL of 2048 characters is accepted, one of 2049 refused naming the field and the rule",
    (_, { model, field, example }) => {
      expect(message(model.normalize(withUrl(example!, field, urlOf(limit))))).toBeNull()
      expect(message(model.normalize(withUrl(example!, field, urlOf(limit + 1))))).toBe(
        `input.${field}[0] must be at most ${limit} characters for ${model.id}`
      )
      // Still a URL rule beyond the length: a long non-URL is told what it is not.
      expect(message(model.normalize(withUrl(example!, field, "x".repeat(limit + 10))))).toMatch(
        new RegExp(`^input\\.${field}\\[0\\] must be an absolute https? (or https )?URL for `)
      )
    }
  )

  it.each(cases.map((c) => [`${c.model.id} ${c.field}`, c] as const))("%s: the JSON Schema says maxLength 2048", (_, { model, field }) => {
    const schema = ModelInfo.inputJsonSchema(model) as { properties: Record<string, { items?: Record<string, unknown> }> }
    expect(schema.properties[field]?.items).toMatchObject({ type: "string", format: "uri", maxLength: limit })
  })

  it("callBackUrl: 2048 characters decode, 2049 are refused naming the field and the rule", () => {
    const body = (callBackUrl: string) => ({ model: "alpha-image-2/text-to-image", input: { prompt: "p" }, callBackUrl })
    expect(message(Api.decodeSubmitRequest(body(urlOf(limit))))).toBeNull()
    expect(message(Api.decodeSubmitRequest(body(urlOf(limit + 1))))).toBe(`callBackUrl must be at most ${limit} characters`)
  })

  it("the URL policy refuses a URL over the limit, whatever field it is in", () => {
    const options = { protocols: ["http:", "https:"] as const, allowPrivate: false }
    expect(UrlPolicy.checkUrl(urlOf(limit), options)).toBeUndefined()
    expect(UrlPolicy.checkUrl(urlOf(limit + 1), options)).toBe(`must be at most ${limit} characters`)
  })
})
