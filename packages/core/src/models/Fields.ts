/**
 * Building blocks of model input schemas. Each carries the message a client sees when
 * the rule is broken; `formatIssue` turns the first broken rule into
 * `input.<field> <rule> for <model>`.
 */
import { Either, ParseResult, Schema, SchemaAST } from "effect"
import { ValidationError } from "../domain/Errors.js"
import { httpsUrlPattern, httpUrlPattern, maxUrlLength, tooLongMessage } from "../domain/UrlPolicy.js"

/** Longest prompt accepted (characters). */
export const MAX_PROMPT_LENGTH = 10_000

/** A required, non-blank prompt of at most MAX_PROMPT_LENGTH characters. */
export const Prompt = Schema.String.annotations({ message: () => "must be a string" }).pipe(
  Schema.filter((s) => s.trim().length > 0, { message: () => "must not be empty", jsonSchema: { minLength: 1, pattern: "\\S" } }),
  Schema.filter((s) => s.length <= MAX_PROMPT_LENGTH, {
    message: () => `must be at most ${MAX_PROMPT_LENGTH} characters`,
    jsonSchema: { maxLength: MAX_PROMPT_LENGTH }
  })
).annotations({ description: "Text description." })

/** One of the given string values. */
export const oneOf = <const L extends ReadonlyArray<string>>(values: L, description?: string) =>
  Schema.Literal(...values).annotations({
    message: () => ({ message: `must be one of ${values.join(", ")}`, override: true }),
    ...(description ? { description } : {})
  })

/** An integer in [min, max]. */
export const intBetween = (min: number, max: number, description?: string) =>
  Schema.Number.pipe(Schema.int(), Schema.between(min, max)).annotations({
    message: () => ({ message: `must be an integer between ${min} and ${max}`, override: true }),
    ...(description ? { description } : {})
  })

/** One of the given integer values. */
export const intOneOf = <const L extends ReadonlyArray<number>>(values: L, description?: string) =>
  Schema.Literal(...values).annotations({
    message: () => ({ message: `must be one of ${values.join(", ")}`, override: true }),
    ...(description ? { description } : {})
  })

/** true or false. */
export const Flag = (description?: string) =>
  Schema.Boolean.annotations({
    message: () => ({ message: "must be true or false", override: true }),
    ...(description ? { description } : {})
  })

/**
 * A URL with one of `protocols`, beginning as `pattern` says (see UrlPolicy.httpUrlPattern),
 * at most `maxUrlLength` characters; `rule` is the refusal of anything else.
 */
const urlField = (protocols: ReadonlyArray<"http:" | "https:">, rule: string, pattern: string) =>
  Schema.String.pipe(
    Schema.filter((s) => {
      try {
        return new RegExp(pattern).test(s) && protocols.includes(new URL(s).protocol as "http:" | "https:")
      } catch {
        return false
      }
    }, {
      message: () => ({ message: rule, override: true }),
      jsonSchema: { format: "uri", pattern }
    }),
    Schema.filter((s) => s.length <= maxUrlLength, { message: () => tooLongMessage, jsonSchema: { maxLength: maxUrlLength } })
  )

/** An absolute http or https URL. Whether its host is public is checked by the submit policy. */
export const HttpUrl = urlField(["http:", "https:"], "must be an absolute http or https URL", httpUrlPattern)

/** An absolute https URL. Whether its host is public is checked by the submit policy. */
export const HttpsUrl = urlField(["https:"], "must be an absolute https URL", httpsUrlPattern)

/**
 * Marks a field whose URLs the service (or its upstream) fetches: a URL or an array of
 * URLs. The submit policy checks every URL so marked, whatever the field is called.
 */
export const MediaUrls: unique symbol = Symbol.for("@mediagate/core/MediaUrls")

/** An array of URLs (https only unless `http` is set) with between `min` and `max` items; media URLs. */
export const urlList = (min: number, max: number, description?: string, options: { readonly http?: boolean } = {}) =>
  Schema.Array(options.http ? HttpUrl : HttpsUrl).annotations({ message: () => "must be an array of URLs" }).pipe(
    Schema.filter((urls) => urls.length >= min && urls.length <= max, {
      jsonSchema: { minItems: min, maxItems: max },
      message: () =>
        min === max
          ? `must contain exactly ${min} URL${min === 1 ? "" : "s"}`
          : min === 1
          ? `must contain between 1 and ${max} URLs`
          : `must contain between ${min} and ${max} URLs`
    })
  ).annotations({ [MediaUrls]: true, ...(description ? { description } : {}) })

const isMarked = (ast: SchemaAST.AST): boolean =>
  ast.annotations[MediaUrls] === true ||
  (SchemaAST.isUnion(ast) && ast.types.some(isMarked)) ||
  (SchemaAST.isRefinement(ast) && isMarked(ast.from))

/** The struct under a schema's refinements and transformations, or undefined. */
const typeLiteral = (ast: SchemaAST.AST): SchemaAST.TypeLiteral | undefined =>
  SchemaAST.isTypeLiteral(ast)
    ? ast
    : SchemaAST.isRefinement(ast)
    ? typeLiteral(ast.from)
    : SchemaAST.isTransformation(ast)
    ? typeLiteral(ast.to)
    : undefined

/** The fields of an input schema marked with `MediaUrls`, in the schema's order. */
export const mediaUrlFields = (schema: Schema.Schema.Any): ReadonlyArray<string> =>
  (typeLiteral(schema.ast)?.propertySignatures ?? [])
    .filter((signature) => typeof signature.name === "string" && isMarked(signature.type))
    .map((signature) => signature.name as string)

/** One media URL of an input: where it is (`imageUrls[0]`, as messages name it) and the URL. */
export interface MediaUrl {
  readonly path: string
  readonly url: string
}

/** Every media URL of an input its schema accepted, field by field in the schema's order. */
export const mediaUrlsOf = (schema: Schema.Schema.Any) => {
  const fields = mediaUrlFields(schema)
  return (input: Readonly<Record<string, unknown>>): ReadonlyArray<MediaUrl> =>
    fields.flatMap((field) => {
      const value = input[field]
      if (typeof value === "string") return [{ path: field, url: value }]
      if (!Array.isArray(value)) return []
      return value.flatMap((url, index) => (typeof url === "string" ? [{ path: `${field}[${index}]`, url }] : []))
    })
}

/** `a.b[0]`; a key that is not a plain name (empty, spaces, dots) is quoted: `input[""]`, `input["a.b"]`. */
const formatPath = (path: ReadonlyArray<PropertyKey>): string =>
  path.map((key) =>
    typeof key === "number"
      ? `[${key}]`
      : /^[A-Za-z_$][\w$-]*$/.test(String(key))
      ? `.${String(key)}`
      : `[${JSON.stringify(String(key))}]`
  ).join("")

/** A ValidationError about one field of a model's input. */
export const invalid = (modelId: string, field: string, rule: string) =>
  new ValidationError({ message: `input.${field} ${rule} for ${modelId}` })

/**
 * Names clients give media fields: the spec's (each model takes one of them) and their
 * snake_case and singular forms. A pass-through model refuses those it does not take:
 * passed through, they would leave the task running in another mode than the client
 * asked for (canvas `imageUrls` running as text-to-image) and their URLs unchecked.
 */
export const mediaFieldNames: ReadonlyArray<string> = [
  "imageUrls", "mediaUrls", "images", "image_urls", "media_urls", "image_url", "imageUrl"
]

/** A media field the model does not take, in a pass-through input: a ValidationError naming the one it takes. */
const foreignMediaField = (
  modelId: string,
  schema: Schema.Schema.Any,
  input: unknown,
  mediaMode: string | undefined
): ValidationError | undefined => {
  if (typeof input !== "object" || input === null) return undefined
  const own = mediaUrlFields(schema)
  const foreign = Object.keys(input).find((key) => mediaFieldNames.includes(key) && !own.includes(key))
  if (foreign === undefined || own[0] === undefined) return undefined
  const hint = mediaMode === undefined ? `media URLs go in input.${own[0]}` : `${mediaMode} takes input.${own[0]}`
  return new ValidationError({ message: `input.${foreign} is not a supported field for ${modelId}; ${hint}` })
}

/** How `decodeInput` treats fields the schema does not name. */
export interface DecodeOptions {
  readonly passThrough?: boolean
  readonly mediaMode?: string
}

/**
 * Decodes `input` with a model's schema; the first broken rule becomes a ValidationError
 * naming field and rule. With `passThrough`, fields the schema does not name are kept
 * (models whose field lists the spec leaves open), except a media field under a name the
 * model does not take (see `mediaFieldNames`; `mediaMode` names the mode its own selects);
 * otherwise they are refused.
 */
export const decodeInput = <A, I>(
  modelId: string,
  schema: Schema.Schema<A, I>,
  input: unknown,
  options: DecodeOptions = {}
): Either.Either<A, ValidationError> => {
  const foreign = options.passThrough ? foreignMediaField(modelId, schema, input, options.mediaMode) : undefined
  return foreign !== undefined ? Either.left(foreign) : decodeWith(modelId, schema, input, options.passThrough === true)
}

const decodeWith = <A, I>(
  modelId: string,
  schema: Schema.Schema<A, I>,
  input: unknown,
  passThrough: boolean
): Either.Either<A, ValidationError> =>
  Schema.decodeUnknownEither(schema, {
    errors: "first",
    onExcessProperty: passThrough ? "preserve" : "error"
  })(input).pipe(
    Either.mapLeft((error) => {
      const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
      if (issue === undefined) return new ValidationError({ message: `input is invalid for ${modelId}` })
      const field = issue.path.length === 0 ? "input" : `input${formatPath(issue.path)}`
      const rule = issue._tag === "Missing"
        ? "is required"
        : issue._tag === "Unexpected"
        ? "is not a supported field"
        : issue.path.length === 0
        ? "must be an object"
        : issue.message
      return new ValidationError({ message: `${field} ${rule} for ${modelId}` })
    })
  )
