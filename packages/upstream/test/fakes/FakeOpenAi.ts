/**
 * An OpenAI-compatible API as OpenAI's docs describe it. Moderations: `POST /v1/moderations`
 * with `{model, input}` answers `{id, model, results: [{flagged, categories, category_scores,
 * category_applied_input_types}]}` with the 13 categories of `omni-moderation-latest`; here a
 * prompt is flagged for each category whose name it contains as `<category>!` (`violence!`),
 * and `input` must be a string or an array of strings (400 otherwise). Images: `POST /v1/images/generations`
 * (JSON) and `POST /v1/images/edits` (multipart/form-data with `image` or `image[]` files)
 * answer `{created, data: [{url} | {b64_json}]}`; `Authorization: Bearer <key>` is required;
 * a prompt the safety system refuses gets 400 `content_policy_violation`.
 */
import * as FakeServer from "./FakeServer.js"

export interface Options {
  readonly key: string
  /** Answer base64 images (`b64_json`) rather than URLs. */
  readonly base64?: boolean
  /** The bytes of each base64 image. */
  readonly image?: Uint8Array
}

export const start = async (options: Options) =>
  FakeServer.start((request, url) => {
    if (request.headers.authorization !== `Bearer ${options.key}`) {
      return { status: 401, body: { error: { message: "Incorrect API key provided", type: "invalid_request_error", code: "invalid_api_key" } } }
    }
    if (request.method === "POST" && url.pathname === "/v1/moderations") return moderation(FakeServer.json(request))
    if (request.method !== "POST" || !["/v1/images/generations", "/v1/images/edits"].includes(url.pathname)) return undefined
    const edits = url.pathname.endsWith("edits")
    const contentType = String(request.headers["content-type"] ?? "")
    if (edits && !contentType.startsWith("multipart/form-data")) {
      return { status: 400, body: { error: { message: "Invalid Content-Type header, expected multipart/form-data", type: "invalid_request_error" } } }
    }
    const fields = edits ? formFields(request.body, contentType) : FakeServer.json(request)
    const prompt = String(fields.prompt ?? "")
    if (prompt === "") return { status: 400, body: { error: { message: "Missing required parameter: 'prompt'.", type: "invalid_request_error", param: "prompt" } } }
    if (prompt.includes("refused")) {
      return { status: 400, body: { error: { message: "Your request was rejected as a result of our safety system.", type: "image_generation_user_error", code: "content_policy_violation" } } }
    }
    if (edits && fields.images === 0) return { status: 400, body: { error: { message: "Missing required parameter: 'image'.", type: "invalid_request_error" } } }
    const n = Number(fields.n ?? 1)
    const data = Array.from({ length: n }, (_, i) =>
      options.base64 === true
        ? { b64_json: Buffer.from(options.image ?? new Uint8Array([1, 2, 3])).toString("base64") }
        : { url: `https://images.example/${edits ? "edit" : "gen"}-${i}.png` })
    return { status: 200, body: { created: 1, data, ...(edits ? { edited_images: fields.images } : {}) } }
  })

/** The text fields of a multipart body, and how many files it holds (`images`). */
const formFields = (body: string, contentType: string): Record<string, unknown> => {
  const boundary = /boundary=(.+)$/.exec(contentType)?.[1] ?? ""
  const fields: Record<string, unknown> = { images: 0 }
  for (const part of body.split(`--${boundary}`)) {
    const name = /name="([^"]+)"/.exec(part)?.[1]
    if (name === undefined) continue
    if (/filename="/.test(part)) fields["images"] = (fields["images"] as number) + 1
    else fields[name] = part.split("\r\n\r\n").slice(1).join("\r\n\r\n").replace(/\r\n$/, "")
  }
  return fields
}

/** The 13 categories of omni-moderation-latest, as OpenAI names them. */
const moderationCategories = [
  "harassment", "harassment/threatening", "hate", "hate/threatening", "illicit", "illicit/violent", "self-harm",
  "self-harm/intent", "self-harm/instructions", "sexual", "sexual/minors", "violence", "violence/graphic"
]

const moderation = (body: { model?: unknown; input?: unknown }): FakeServer.Reply => {
  const inputs = typeof body.input === "string" ? [body.input] : body.input
  if (!Array.isArray(inputs) || inputs.some((input) => typeof input !== "string")) {
    return { status: 400, body: { error: { message: "Invalid type for 'input'.", type: "invalid_request_error", param: "input" } } }
  }
  const results = inputs.map((input: string) => {
    const categories = Object.fromEntries(moderationCategories.map((category) => [category, input.includes(`${category}!`)]))
    return {
      flagged: Object.values(categories).some(Boolean),
      categories,
      category_scores: Object.fromEntries(moderationCategories.map((category) => [category, categories[category] ? 0.98 : 0.001])),
      category_applied_input_types: Object.fromEntries(moderationCategories.map((category) => [category, ["text"]]))
    }
  })
  return { status: 200, body: { id: "modr-1", model: String(body.model ?? "omni-moderation-latest"), results } }
}
