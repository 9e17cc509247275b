/**
 * The OpenAPI document describes the answers the server gives and nothing else: the
 * framework's own decode error (`{issues, message, _tag}`) is never returned (every 400 is
 * `{code, msg}`: what HttpApi cannot decode is answered as `BadRequest`), and the titles and
 * ids Schema derives from code (`between(4, 15)`, `int`) are not names of the API. The
 * headers of a 429 and a 503, which HttpApi cannot declare, are added, and so is the bearer key as the
 * document's default security, which HttpApi writes on each operation only.
 */
import type * as OpenApi from "@effect/platform/OpenApi"

/** Component schemas of the framework's decode error, which our answers never use. */
const frameworkSchemas = new Set(["HttpApiDecodeError", "Issue", "PropertyKey"])

const isFrameworkRef = (schema: unknown): boolean =>
  typeof schema === "object" && schema !== null &&
  frameworkSchemas.has(String((schema as { $ref?: unknown }).$ref ?? "").replace("#/components/schemas/", ""))

/**
 * A copy of a JSON value without `title` and `$id` keys: Schema derives them from code
 * (`between(4, 15)`, `int`, `/schemas/unknown`), and the repeated `$id` of every unknown
 * value makes the document an invalid JSON Schema.
 */
const withoutTitles = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(withoutTitles)
    : typeof value === "object" && value !== null
    ? Object.fromEntries(
      Object.entries(value).filter(([key]) => key !== "title" && key !== "$id").map(([key, v]) => [key, withoutTitles(v)])
    )
    : value

type Response = {
  description: string
  headers?: Record<string, unknown>
  content?: Record<string, { schema: Record<string, unknown> }>
}

/**
 * Headers of answers by status, which HttpApi has no way to declare: every 429 and 503
 * carries Retry-After; the key's rate limit adds the IETF draft's RateLimit fields.
 */
const statusHeaders: Readonly<Record<string, Record<string, unknown>>> = {
  "503": {
    "Retry-After": {
      description: "Seconds to wait before trying again.",
      required: true,
      schema: { type: "integer", minimum: 1 }
    }
  },
  "429": {
    "Retry-After": {
      description: "Seconds to wait before trying again.",
      required: true,
      schema: { type: "integer", minimum: 1 }
    },
    "RateLimit-Policy": {
      description: "With the key's rate limit only (draft-ietf-httpapi-ratelimit-headers): `\"per-key\";q=<requests a second>;w=1`.",
      required: false,
      schema: { type: "string" }
    },
    RateLimit: {
      description: "With the key's rate limit only: `\"per-key\";r=0;t=<seconds until a request is allowed>`.",
      required: false,
      schema: { type: "string" }
    }
  }
}

const withHeaders = (status: string, response: Response): Response =>
  statusHeaders[status] === undefined ? response : { ...response, headers: { ...response.headers, ...statusHeaders[status] } }

/** The response without the framework's decode error, or undefined when nothing else was in it. */
const cleanResponse = (status: string, response: Response): Response | undefined => {
  const json = response.content?.["application/json"]
  if (json === undefined) return response
  if (isFrameworkRef(json.schema)) return undefined
  const anyOf = json.schema.anyOf as ReadonlyArray<unknown> | undefined
  if (anyOf === undefined || !anyOf.some(isFrameworkRef)) return response
  const rest = anyOf.filter((member) => !isFrameworkRef(member))
  const schema = rest.length === 1 ? rest[0] as Record<string, unknown> : { ...json.schema, anyOf: rest }
  return {
    description: status === "400" ? "The request broke a rule: msg names the field and the rule." : response.description,
    content: { "application/json": { schema } }
  }
}

/**
 * A header parameter named as HTTP writes it (`Idempotency-Key`): header schemas name them in
 * lower case, as the server reads them, and header names are case-insensitive.
 */
const headerName = (parameter: OpenApi.OpenAPISpecParameter): OpenApi.OpenAPISpecParameter =>
  parameter.in === "header"
    ? { ...parameter, name: parameter.name.replace(/(^|-)([a-z])/g, (_, dash: string, letter: string) => dash + letter.toUpperCase()) }
    : parameter

/**
 * The document's default security: every distinct requirement it states, at the top or on
 * an operation. HttpApi writes a group's security middleware on each of its operations and
 * nothing at the top, and viewers read the top: Scalar's docs page offered "No authentication
 * selected" without it. Each operation keeps its own `security`, which overrides the default
 * (`[]` on a public one), so the default changes what no operation requires.
 */
const defaultSecurity = (spec: OpenApi.OpenAPISpec): Array<OpenApi.OpenAPISecurityRequirement> => {
  const operations = Object.values(spec.paths).flatMap((item) => Object.values(item) as Array<OpenApi.OpenAPISpecOperation>)
  const requirements = [spec.security, ...operations.map((operation) => operation.security)].flat()
  return [...new Map(requirements.map((requirement) => [JSON.stringify(requirement), requirement])).values()]
}

/**
 * One tag per name: the admin API's groups share the tag `admin` (OpenAPI wants tag names
 * unique), the first with a description giving it.
 */
const uniqueTags = (tags: ReadonlyArray<OpenApi.OpenAPISpecTag>): Array<OpenApi.OpenAPISpecTag> => {
  const byName = new Map<string, OpenApi.OpenAPISpecTag>()
  for (const tag of tags) {
    const known = byName.get(tag.name)
    if (known === undefined || (known.description === undefined && tag.description !== undefined)) byName.set(tag.name, tag)
  }
  return [...byName.values()]
}

/** The document as it is served (the `servers` entry is added per request). */
export const clean = (spec: OpenApi.OpenAPISpec): OpenApi.OpenAPISpec => {
  const paths = Object.fromEntries(Object.entries(spec.paths).map(([path, item]) => [
    path,
    Object.fromEntries(Object.entries(item).map(([method, operation]) => {
      const op = operation as OpenApi.OpenAPISpecOperation
      const responses = Object.fromEntries(
        Object.entries(op.responses).flatMap(([status, response]) => {
          const cleaned = cleanResponse(status, response as Response)
          return cleaned === undefined ? [] : [[status, withHeaders(status, cleaned)]]
        })
      )
      return [method, { ...op, parameters: op.parameters.map(headerName), responses }]
    }))
  ]))
  const schemas = Object.fromEntries(Object.entries(spec.components.schemas).filter(([name]) => !frameworkSchemas.has(name)))
  return {
    ...spec,
    tags: uniqueTags(spec.tags),
    security: defaultSecurity(spec),
    paths: withoutTitles(paths) as OpenApi.OpenAPISpec["paths"],
    components: withoutTitles({ ...spec.components, schemas }) as OpenApi.OpenAPISpec["components"]
  }
}
