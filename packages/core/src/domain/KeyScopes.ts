/**
 * Scoped keys (as LiteLLM's virtual keys): the rules a key's `ApiKeys.KeyScope` sets, read from
 * what an operator types (the admin CLI, the admin API), checked at submit, and the sentences
 * of a refusal, which name the rule.
 *
 * - models: glob patterns, matched by picomatch (`*` any run of characters, `/` too, as the
 *   contract has it: `alpha-*` is every `alpha-image-2/...` mode; `?` one character but `/`;
 *   `[...]` one of a set), a comma list as typed: `alpha-*,motion-2.0*`;
 * - a monthly cap in US dollars (`50`, `$12.50`), counted per UTC calendar month;
 * - a rate limit, `10/s`, `600/min` or `36000/h`, with a burst of the per-second figure rounded
 *   up (at least 1): a key limited to 600 a minute may send 10 at once, not 600.
 *
 * Every parse answers the value, or the rule the input broke (for a 400 or a CLI error).
 */
import { Either } from "effect"
import picomatch from "picomatch/posix.js"
import type { KeyScope } from "./ApiKeys.js"
import { formatUsd, parseUsd } from "./Usd.js"

type RateLimit = NonNullable<KeyScope["rateLimit"]>

/** Patterns a key may carry at most, and the longest pattern. */
export const maxPatterns = 64
export const maxPatternLength = 128

// Model ids are letters, digits, `.`, `_`, `-`, `:` and `/`; a pattern adds the wildcards `*`
// and `?` and `[...]` sets. Braces and extglobs are off: a comma separates patterns. `bash`
// makes a single `*` cross `/` (a model id is not a path).
const patternCharacters = /^[A-Za-z0-9._:/*?[\]-]+$/
const options = { dot: true, nobrace: true, noextglob: true, nonegate: true, bash: true } as const

// Compiled matchers by pattern: every submit of a scoped key matches its patterns.
const matchers = new Map<string, (model: string) => boolean>()
const matcher = (pattern: string): (model: string) => boolean => {
  const known = matchers.get(pattern)
  if (known !== undefined) return known
  const made = picomatch(pattern, options)
  if (matchers.size >= 1_000) matchers.delete(matchers.keys().next().value!)
  matchers.set(pattern, made)
  return made
}

/** Whether a key with `scope` may submit `model`: every model when the scope names none. */
export const modelAllowed = (scope: KeyScope | undefined, model: string): boolean =>
  scope?.models == null || scope.models.some((pattern) => matcher(pattern)(model))

/** Whether `scope` sets no rule at all (absent counts as none). */
export const isUnscoped = (scope: KeyScope | undefined): boolean =>
  scope === undefined || (scope.models === null && scope.monthlyCapMicroUsd === null && scope.rateLimit === null)

/** The UTC calendar month of `at` (epoch milliseconds), as the cap counts it: `2026-12`. */
export const monthOf = (at: number): string => new Date(at).toISOString().slice(0, 7)

/** The start of the UTC month after `at`'s, in epoch milliseconds: when a cap starts afresh. */
export const nextMonthStart = (at: number): number => {
  const date = new Date(at)
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1)
}

/** One pattern, checked: the rule it breaks, or the pattern trimmed. */
export const parsePattern = (raw: string): Either.Either<string, string> => {
  const pattern = raw.trim()
  if (pattern.length === 0) return Either.left("a model pattern must not be empty")
  if (pattern.length > maxPatternLength) return Either.left(`a model pattern must be at most ${maxPatternLength} characters`)
  if (!patternCharacters.test(pattern)) {
    return Either.left(
      `model pattern ${JSON.stringify(pattern)} may hold only letters, digits, . _ - : / and the wildcards * (any run of characters), ? (one) and [...] (one of a set)`
    )
  }
  try {
    picomatch.makeRe(pattern, { ...options, strictBrackets: true })
  } catch {
    return Either.left(`model pattern ${JSON.stringify(pattern)} is not a valid glob (an unclosed [ ?)`)
  }
  return Either.right(pattern)
}

/**
 * The models a key may use, as typed: patterns separated by commas (`alpha-*, clip3`), each
 * checked (`parsePattern`), repeats dropped, at most `maxPatterns`.
 */
export const parseModels = (raw: string): Either.Either<ReadonlyArray<string>, string> => {
  const parts = raw.split(",").map((part) => part.trim())
  if (parts.every((part) => part.length === 0)) {
    return Either.left("models must name at least one model or pattern, such as alpha-* or clip3 (comma-separated)")
  }
  if (parts.length > maxPatterns) return Either.left(`models may list at most ${maxPatterns} patterns`)
  const patterns: Array<string> = []
  for (const part of parts) {
    const parsed = parsePattern(part)
    if (Either.isLeft(parsed)) return Either.left(parsed.left)
    if (!patterns.includes(parsed.right)) patterns.push(parsed.right)
  }
  return Either.right(patterns)
}

/** A list of patterns already split (the admin API's JSON array), checked as `parseModels` checks a typed one. */
export const checkModels = (patterns: ReadonlyArray<string>): Either.Either<ReadonlyArray<string>, string> =>
  patterns.some((pattern) => pattern.includes(",")) ? Either.left("a model pattern must not hold a comma") : parseModels(patterns.join(","))

/** A monthly cap in US dollars as typed (`50`, `$12.50`), in micro-USD. */
export const parseMonthlyCap = (raw: string): Either.Either<number, string> =>
  Either.mapLeft(parseUsd(raw), (rule) => `the monthly cap ${rule}`)

const units: Record<string, number> = { s: 1, sec: 1, second: 1, m: 60, min: 60, minute: 60, h: 3600, hour: 3600 }

/**
 * A rate limit as typed, `10/s`, `600/min` or `36000/h`: that many requests on average, in
 * bursts of the per-second figure rounded up (at least 1).
 */
export const parseRateLimit = (raw: string): Either.Either<RateLimit, string> => {
  const match = /^(\d{1,9})\s*\/\s*([a-z]+)$/.exec(raw.trim().toLowerCase())
  const seconds = match === null ? undefined : units[match[2]!]
  if (match === null || seconds === undefined) {
    return Either.left(`the rate limit must be requests per second, minute or hour, such as 10/s, 600/min or 36000/h (got ${JSON.stringify(raw)})`)
  }
  const count = Number(match[1])
  if (count <= 0) return Either.left("the rate limit must allow at least one request")
  const perSecond = count / seconds
  if (perSecond > 1_000_000) return Either.left("the rate limit must be at most 1000000/s")
  return Either.right({ perSecond, burst: Math.max(1, Math.ceil(perSecond)) })
}

/** A rate limit as people read it: `10/s`, `1/min`, `5/h`; the burst when it is not the default. */
export const formatRateLimit = (limit: RateLimit): string => {
  const whole = (n: number) => Math.abs(n - Math.round(n)) < 1e-9
  const rate = whole(limit.perSecond)
    ? `${Math.round(limit.perSecond)}/s`
    : whole(limit.perSecond * 60)
    ? `${Math.round(limit.perSecond * 60)}/min`
    : `${Math.round(limit.perSecond * 3600)}/h`
  return limit.burst === Math.max(1, Math.ceil(limit.perSecond)) ? rate : `${rate} (burst ${limit.burst})`
}

/** A scope in one line for people (`models alpha-*, clip3; cap $50.00 a month; 10/s`); `unscoped` when it sets nothing. */
export const describe = (scope: KeyScope | undefined): string => {
  if (scope === undefined || isUnscoped(scope)) return "unscoped"
  return [
    scope.models === null ? undefined : `models ${scope.models.join(", ")}`,
    scope.monthlyCapMicroUsd === null ? undefined : `cap ${formatUsd(scope.monthlyCapMicroUsd)} a month`,
    scope.rateLimit === null ? undefined : formatRateLimit(scope.rateLimit)
  ].filter((part) => part !== undefined).join("; ")
}

/** The refusal of a model the key's scope does not allow: `this key may not use clip3; it may use: alpha-*, motion-*`. */
export const modelRefusal = (scope: KeyScope | undefined, model: string): string => {
  const allowed = scope?.models ?? []
  return allowed.length === 0
    ? `this key may not use ${model}; it may use no model`
    : `this key may not use ${model}; it may use: ${allowed.join(", ")}`
}

/** The refusal of a hold past the key's cap: `this key has spent its $50.00 cap for 2026-12`. */
export const capRefusal = (reached: { readonly capMicroUsd: number; readonly month: string }): string =>
  `this key has spent its ${formatUsd(reached.capMicroUsd)} cap for ${reached.month}`
