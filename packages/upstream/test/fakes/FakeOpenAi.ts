/**
 * An OpenAI-compatible API as the official client (`openai` 6, resources/images and
 * resources/moderations) describes it; `test/conformance/OpenAi.conformance.test.ts` drives
 * it with that client, so every answer here is one the client accepts.
 *
 * Images: `POST /v1/images/generations` (JSON) and `POST /v1/images/edits` (multipart with
 * `image` or `image[]` files) answer `{created, data: [...]}` with real PNGs of the size
 * asked (`auto`: 1024x1024). The GPT image models always answer `b64_json` (with
 * `output_format`, `size`, `quality`, `background` and `usage`); dall-e-2 and dall-e-3 answer
 * `url`s unless `response_format` is `b64_json`, the files served by a second loopback
 * server (`files`), as OpenAI serves them from its blob storage, without the key.
 *
 * Refused as the real service refuses them, with 400 and `{error: {message, type:
 * "invalid_request_error", param, code}}`: a parameter the model does not take (`Unknown
 * parameter: 'x'.`, e.g. `response_format` for a GPT image model), an unknown model, a
 * size, `n`, quality or style the model does not take, edits on dall-e-3, a file whose
 * part is not typed as an image the model takes (`Invalid file 'image': unsupported
 * mimetype ('application/octet-stream'). ...`), a file whose bytes are not what its type
 * says, more images than the model takes, a non-square dall-e-2 image. Known gaps: the
 * answer is always a PNG (`output_format` is echoed as `png`), there is no streaming
 * (`stream: true` is refused), and dall-e-2's demand for an RGBA PNG is not checked.
 *
 * A prompt containing `refused` gets the safety system's 400 (`content_policy_violation`);
 * a wrong key 401 `invalid_api_key`. Moderations: `POST /v1/moderations` with `{model,
 * input}` answers `{id, model, results}` with the 13 categories of `omni-moderation-latest`;
 * a prompt is flagged for each category whose name it contains as `<category>!`.
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { Png } from "@mediagate/upstream"
import * as FakeServer from "./FakeServer.js"

export interface Options {
  readonly key: string
}

export interface FakeOpenAi extends FakeServer.FakeServer {
  /** Where the `url` answers' files live (and any file a test puts there with `files.put`). */
  readonly files: FileHost
}

/** An OpenAI error answer: `{error: {message, type, param, code}}`. */
export const error = (
  status: number,
  message: string,
  details: { readonly type?: string; readonly param?: string | null; readonly code?: string | null } = {}
): FakeServer.Reply => ({
  status,
  body: { error: { message, type: details.type ?? "invalid_request_error", param: details.param ?? null, code: details.code ?? null } }
})

/** A 429 as OpenAI sends it, with `retry-after` in seconds. */
export const rateLimited = (retryAfterSeconds: number): FakeServer.Reply => ({
  ...error(429, "Rate limit reached for images per minute. Please try again later.", { type: "requests", code: "rate_limit_exceeded" }),
  headers: { "retry-after": String(retryAfterSeconds) }
})

/** A 5xx as OpenAI sends it. */
export const serverError = (status = 500): FakeServer.Reply =>
  error(status, "The server had an error while processing your request. Sorry about that!", { type: "server_error" })

/** What one family of image models takes, after the official client's types (resources/images.ts). */
interface Family {
  readonly models: ReadonlyArray<string>
  /** The sizes it draws; `free` sizes (gpt-image-2) take any WxH within its limits too. */
  readonly sizes: ReadonlyArray<string>
  readonly free?: boolean
  readonly maxN: number
  /** Qualities of generations and of edits; `auto` is every model's default, so every model takes it. */
  readonly quality: ReadonlyArray<string>
  readonly editQuality: ReadonlyArray<string>
  /** The parameters of generations and of edits beyond those every model takes; edits: null when it has none. */
  readonly generate: ReadonlyArray<string>
  readonly edit: ReadonlyArray<string> | null
  /** The file types its edits take, and how many images. */
  readonly fileTypes: ReadonlyArray<string>
  readonly maxImages: number
  /** It answers `url`s by default (`response_format`); otherwise always `b64_json`. */
  readonly urls: boolean
}

const gptGenerate = ["background", "moderation", "output_compression", "output_format", "partial_images"]
const gptEdit = ["background", "input_fidelity", "output_compression", "output_format", "partial_images"]
const gptImage = {
  sizes: ["1024x1024", "1536x1024", "1024x1536", "auto"],
  maxN: 10,
  quality: ["low", "medium", "high", "auto"],
  editQuality: ["low", "medium", "high", "auto"],
  generate: gptGenerate,
  edit: gptEdit,
  fileTypes: ["image/png", "image/jpeg", "image/webp"],
  maxImages: 16,
  urls: false
}

const families: ReadonlyArray<Family> = [
  {
    models: ["dall-e-2"],
    sizes: ["256x256", "512x512", "1024x1024"],
    maxN: 10,
    quality: ["standard", "auto"],
    editQuality: ["standard", "auto"],
    generate: ["response_format"],
    edit: ["response_format"],
    fileTypes: ["image/png"],
    maxImages: 1,
    urls: true
  },
  {
    models: ["dall-e-3"],
    sizes: ["1024x1024", "1792x1024", "1024x1792"],
    maxN: 1,
    quality: ["standard", "hd", "auto"],
    editQuality: [],
    generate: ["response_format", "style"],
    edit: null,
    fileTypes: [],
    maxImages: 0,
    urls: true
  },
  { models: ["gpt-image-1", "gpt-image-1-mini", "gpt-image-1.5", "chatgpt-image-latest"], ...gptImage },
  { models: ["gpt-image-2", "gpt-image-2-2026-04-21"], ...gptImage, free: true }
]
const models = families.flatMap((family) => family.models)
const familyOf = (model: string) => families.find((family) => family.models.includes(model))

/** Parameters every image model takes. */
const common = ["prompt", "model", "n", "size", "quality", "user", "stream"]
const commonEdit = [...common, "image", "image[]", "mask"]

const invalid = (message: string, param: string | null, code: string | null = null) =>
  error(400, message, { param, code })

/** A list as OpenAI's messages write it: 'a', 'b', and 'c'. */
const quoted = (values: ReadonlyArray<string>) => {
  const items = values.map((value) => `'${value}'`)
  return items.length < 3 ? items.join(" and ") : `${items.slice(0, -1).join(", ")}, and ${items.at(-1)}`
}

/** The size a gpt-image-2 takes besides the standard ones: each edge a multiple of 16, 1:3 to 3:1, at most 3840x2160. */
const freeSize = (width: number, height: number) =>
  width % 16 === 0 && height % 16 === 0 && Math.max(width, height) <= 3 * Math.min(width, height) &&
  Math.max(width, height) <= 3840 && width * height <= 3840 * 2160

/** A multipart part: its field name, and for a file its name, type and bytes. */
export interface Part {
  readonly name: string
  readonly filename?: string
  readonly type?: string
  readonly value: Buffer
}

/** The parts of a multipart/form-data body recorded by the fake server (latin1, so bytes survive). */
export const parts = (request: FakeServer.Recorded): ReadonlyArray<Part> => {
  const boundary = /boundary=("?)([^";]+)\1/.exec(String(request.headers["content-type"] ?? ""))?.[2]
  if (boundary === undefined) return []
  const found: Array<Part> = []
  for (const chunk of request.body.split(`--${boundary}`).slice(1)) {
    if (chunk.startsWith("--")) break
    const [head = "", ...rest] = chunk.replace(/^\r\n/, "").split("\r\n\r\n")
    const name = /name="([^"]*)"/.exec(head)?.[1]
    if (name === undefined) continue
    const filename = /filename="([^"]*)"/.exec(head)?.[1]
    const type = /content-type:\s*([^\r\n]+)/i.exec(head)?.[1]?.trim()
    const value = Buffer.from(rest.join("\r\n\r\n").replace(/\r\n$/, ""), "latin1")
    found.push({ name, value, ...(filename === undefined ? {} : { filename, type: type ?? "application/octet-stream" }) })
  }
  return found
}

/** The image type of bytes by their magic numbers: what the service decodes, whatever the part says. */
const typeOfBytes = (bytes: Buffer) =>
  bytes.subarray(0, 8).equals(Buffer.from(Png.signature)) ? "image/png"
  : bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff ? "image/jpeg"
  : bytes.toString("latin1", 0, 4) === "RIFF" && bytes.toString("latin1", 8, 12) === "WEBP" ? "image/webp"
  : undefined

export const start = async (options: Options): Promise<FakeOpenAi> => {
  const files = await startFileHost()
  let next = 0
  const server = await FakeServer.start((request, url) => {
    if (request.headers.authorization !== `Bearer ${options.key}`) {
      return error(401, "Incorrect API key provided", { code: "invalid_api_key" })
    }
    if (request.method === "POST" && url.pathname === "/v1/moderations") return moderation(FakeServer.json(request))
    if (request.method !== "POST" || !["/v1/images/generations", "/v1/images/edits"].includes(url.pathname)) return undefined
    const edits = url.pathname.endsWith("edits")
    const contentType = String(request.headers["content-type"] ?? "")
    if (edits && !contentType.startsWith("multipart/form-data")) {
      return invalid("Invalid Content-Type header (application/json), expected multipart/form-data.", null)
    }
    const given = edits ? parts(request) : []
    const fields: Record<string, unknown> = edits
      ? Object.fromEntries(given.filter((part) => part.filename === undefined).map((part) => [part.name, part.value.toString("utf8")]))
      : FakeServer.json(request)
    // A file part's name is a parameter like any other: `image`, `image[]` or `mask`.
    for (const part of given) if (part.filename !== undefined && !(part.name in fields)) fields[part.name] = "(file)"
    const images = given.filter((part) => part.filename !== undefined && part.name !== "mask")
    return image(edits, fields, images, () => `${files.url}/img-${++next}.png`, files.put)
  })
  return { ...server, files, close: () => Promise.all([server.close(), files.close()]).then(() => undefined) }
}

/** The answer to an images call, or the 400 the service gives it. */
const image = (
  edits: boolean,
  fields: Record<string, unknown>,
  images: ReadonlyArray<Part>,
  nextUrl: () => string,
  put: (path: string, bytes: Uint8Array, type: string) => void
): FakeServer.Reply => {
  const model = String(fields["model"] ?? (edits ? "gpt-image-1.5" : "dall-e-2"))
  const family = familyOf(model)
  if (family === undefined) return invalid(`Invalid value: '${model}'. Supported values are: ${quoted(models)}.`, "model", "invalid_value")
  if (edits && family.edit === null) {
    return invalid(`Invalid value: '${model}'. Value must be 'dall-e-2' or a GPT image model.`, "model", "invalid_value")
  }
  const allowed = edits ? [...commonEdit, ...(family.edit ?? [])] : [...common, ...family.generate]
  const unknown = Object.keys(fields).find((name) => !allowed.includes(name))
  if (unknown !== undefined) return invalid(`Unknown parameter: '${unknown}'.`, unknown, "unknown_parameter")
  const prompt = fields["prompt"]
  if (typeof prompt !== "string" || prompt === "") return invalid("Missing required parameter: 'prompt'.", "prompt", "missing_required_parameter")

  // A form's fields are text; JSON's n must be a number.
  const n = fields["n"] === undefined ? 1 : edits || typeof fields["n"] === "number" ? Number(fields["n"]) : Number.NaN
  if (!Number.isInteger(n)) return invalid(`Invalid type for 'n': expected an integer, but got ${JSON.stringify(fields["n"])} instead.`, "n", "invalid_type")
  if (n < 1) return invalid(`Invalid 'n': integer below minimum value. Expected a value >= 1, but got ${n} instead.`, "n", "integer_below_min_value")
  if (n > family.maxN) {
    return invalid(`Invalid 'n': integer above maximum value. Expected a value <= ${family.maxN}, but got ${n} instead.`, "n", "integer_above_max_value")
  }
  const size = String(fields["size"] ?? (family.sizes.includes("auto") ? "auto" : "1024x1024"))
  const [width, height] = size === "auto" ? [1024, 1024] : size.split("x").map(Number) as [number, number]
  if (!family.sizes.includes(size) && !(family.free === true && /^\d+x\d+$/.test(size) && freeSize(width, height))) {
    return invalid(`Invalid value: '${size}'. Supported values are: ${quoted(family.sizes)}.`, "size", "invalid_value")
  }
  const quality = String(fields["quality"] ?? "auto")
  const qualities = edits ? family.editQuality : family.quality
  if (!qualities.includes(quality)) return invalid(`Invalid value: '${quality}'. Supported values are: ${quoted(qualities)}.`, "quality", "invalid_value")
  const format = String(fields["response_format"] ?? "url")
  if (!["url", "b64_json"].includes(format)) return invalid(`Invalid value: '${format}'. Supported values are: 'url' and 'b64_json'.`, "response_format", "invalid_value")
  if (fields["style"] !== undefined && !["vivid", "natural"].includes(String(fields["style"]))) {
    return invalid(`Invalid value: '${String(fields["style"])}'. Supported values are: 'vivid' and 'natural'.`, "style", "invalid_value")
  }
  if (fields["stream"] === true || fields["stream"] === "true") return invalid("This fake does not stream: send stream false.", "stream")

  if (edits) {
    const refused = checkImages(model, family, images)
    if (refused !== undefined) return refused
  }
  if (prompt.includes("refused")) {
    return error(400, "Your request was rejected as a result of our safety system. Your prompt may contain text that is not allowed by our safety system.", {
      type: "image_generation_user_error",
      code: "content_policy_violation"
    })
  }

  const data = Array.from({ length: n }, (_, i) => {
    const png = pngOf(width, height, i + 1)
    if (!family.urls || format === "b64_json") return { b64_json: Buffer.from(png).toString("base64") }
    const url = nextUrl()
    put(new URL(url).pathname, png, "image/png")
    return { url, ...(model === "dall-e-3" ? { revised_prompt: `${prompt}, in detail` } : {}) }
  })
  if (family.urls) return { status: 200, body: { created: 1_700_000_000, data } }
  return {
    status: 200,
    body: {
      created: 1_700_000_000,
      background: "opaque",
      data,
      output_format: "png",
      quality: quality === "auto" ? "medium" : quality,
      size: size === "auto" ? "1024x1024" : size,
      usage: { input_tokens: 50, input_tokens_details: { image_tokens: 40 * images.length, text_tokens: 10 }, output_tokens: 1056 * n, total_tokens: 50 + 1056 * n }
    }
  }
}

/** The files of an edit as the service checks them: count, declared type, the bytes behind it, dall-e-2's square. */
const checkImages = (model: string, family: Family, images: ReadonlyArray<Part>): FakeServer.Reply | undefined => {
  if (images.length === 0) return invalid("Missing required parameter: 'image'.", "image", "missing_required_parameter")
  if (images.length > family.maxImages) {
    return invalid(`Invalid 'image': too many images. ${model} takes at most ${family.maxImages}, but got ${images.length}.`, "image", "too_many_images")
  }
  for (const [i, file] of images.entries()) {
    if (!family.fileTypes.includes(file.type ?? "")) {
      return invalid(
        `Invalid file 'image': unsupported mimetype ('${file.type}'). Supported file formats are ${quoted(family.fileTypes)}.`,
        "image",
        "unsupported_file"
      )
    }
    if (typeOfBytes(file.value) !== file.type) {
      return invalid(`Invalid image file or mode for image ${i + 1}, please check your image file.`, "image", "invalid_image_file")
    }
    const png = file.type === "image/png" ? Png.readPngSize(file.value) : undefined
    if (family.maxImages === 1 && png !== undefined && png.width !== png.height) {
      return invalid("Invalid input image - image must be square.", "image", "invalid_image")
    }
  }
  return undefined
}

const pngs = new Map<string, Uint8Array>()
/** A real PNG of the size, the same for the same size and seed (kept: a 1536x1024 takes a few milliseconds to encode). */
const pngOf = (width: number, height: number, seed: number) => {
  const key = `${width}x${height}:${seed}`
  const found = pngs.get(key) ?? Png.encodePng({ width, height, seed })
  pngs.set(key, found)
  return found
}

/** A loopback server of files: what it was given, with the type it was given (a test's reference images, the answers' URLs). */
export interface FileHost {
  readonly url: string
  readonly put: (path: string, bytes: Uint8Array, type: string) => void
  readonly close: () => Promise<void>
}

export const startFileHost = async (): Promise<FileHost> => {
  const stored = new Map<string, { readonly bytes: Uint8Array; readonly type: string }>()
  const server = Http.createServer((request, response) => {
    const file = stored.get(new URL(request.url ?? "/", "http://files").pathname)
    if (file === undefined) return void response.writeHead(404, { "content-type": "text/plain" }).end("Not Found")
    response.writeHead(200, { "content-type": file.type, "content-length": file.bytes.length }).end(Buffer.from(file.bytes))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    put: (path, bytes, type) => void stored.set(path, { bytes, type }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

/** The 13 categories of omni-moderation-latest, as OpenAI names them. */
const moderationCategories = [
  "harassment", "harassment/threatening", "hate", "hate/threatening", "illicit", "illicit/violent", "self-harm",
  "self-harm/intent", "self-harm/instructions", "sexual", "sexual/minors", "violence", "violence/graphic"
]

const moderation = (body: { model?: unknown; input?: unknown }): FakeServer.Reply => {
  const unknown = Object.keys(body).find((name) => name !== "model" && name !== "input")
  if (unknown !== undefined) return invalid(`Unknown parameter: '${unknown}'.`, unknown, "unknown_parameter")
  const inputs = typeof body.input === "string" ? [body.input] : body.input
  if (!Array.isArray(inputs) || inputs.some((input) => typeof input !== "string")) {
    return invalid("Invalid type for 'input'.", "input", "invalid_type")
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
