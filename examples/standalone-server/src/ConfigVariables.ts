/**
 * The variables the standalone server reads (the README lists them) and the parsers their
 * values go through: each answers the rule a value broke, as one line naming the variable.
 */
import { Config, ConfigError, Duration, Either, Option, Redacted } from "effect"

/** Every variable the server reads, for the README check. */
export const variables = [
  "MEDIAGATE_PORT",
  "MEDIAGATE_HOST",
  "MEDIAGATE_PUBLIC_URL",
  "MEDIAGATE_API_KEY",
  "MEDIAGATE_ADMIN_KEY",
  "MEDIAGATE_STARTING_CREDITS",
  "MEDIAGATE_SIMULATOR_PROFILE",
  "MEDIAGATE_ALLOW_PRIVATE_URLS",
  "MEDIAGATE_UPSTREAM",
  "MEDIAGATE_DATABASE_URL",
  "MEDIAGATE_MEDIA_DIR",
  "MEDIAGATE_MEDIA_URL",
  "MEDIAGATE_MEDIA_REDIRECT",
  "MEDIAGATE_MEDIA_RETENTION",
  "MEDIAGATE_LEASE",
  "MEDIAGATE_SHUTDOWN_GRACE",
  "MEDIAGATE_MAX_RUNNING",
  "MEDIAGATE_MAX_RUNNING_PER_ACCOUNT",
  "MEDIAGATE_MAX_RUNNING_PER_PROVIDER",
  "MEDIAGATE_DEADLINES",
  "MEDIAGATE_RATE_LIMIT",
  "MEDIAGATE_RATE_LIMIT_BURST",
  "MEDIAGATE_RATE_LIMIT_SHARED_TIMEOUT",
  "MEDIAGATE_MAX_HELD_PER_KEY",
  "MEDIAGATE_MAX_HELD",
  "MEDIAGATE_AUTH_FAILURE_LIMIT",
  "MEDIAGATE_HEADERS_TIMEOUT",
  "MEDIAGATE_BODY_TIMEOUT",
  "MEDIAGATE_UPLOAD_TIMEOUT",
  "MEDIAGATE_MODERATION",
  "MEDIAGATE_MODERATION_RULES",
  "MEDIAGATE_MODERATION_URL",
  "MEDIAGATE_MODERATION_KEY",
  "MEDIAGATE_MODERATION_MODEL",
  "MEDIAGATE_MODERATION_FAIL_OPEN",
  "MEDIAGATE_ROUTES",
  "MEDIAGATE_UNROUTED",
  "MEDIAGATE_WEBHOOK_PREFIX",
  "MEDIAGATE_LOG_FORMAT",
  "MEDIAGATE_LOG_LEVEL",
  "MEDIAGATE_METRICS",
  "FAL_KEY",
  "MEDIAGATE_FAL_URL",
  "MEDIAGATE_FAL_JWKS_URL",
  "REPLICATE_API_TOKEN",
  "MEDIAGATE_REPLICATE_URL",
  "MEDIAGATE_REPLICATE_WAIT",
  "MEDIAGATE_REPLICATE_WEBHOOK_EVENTS",
  "REPLICATE_WEBHOOK_SECRET",
  "OPENAI_API_KEY",
  "MEDIAGATE_OPENAI_URL",
  "MEDIAGATE_RELAY_URL",
  "MEDIAGATE_RELAY_KEY",
  "MEDIAGATE_RELAY_WEBHOOK_SECRET",
  "MEDIAGATE_UPLOAD_MAX_BYTES",
  "MEDIAGATE_UPLOAD_RETENTION",
  "MEDIAGATE_UPLOAD_RATE_LIMIT"
] as const

export type Variable = typeof variables[number]

/** An operator's value in a message, cut short like every other echoed string. */
export const shown = (value: string) => JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value)

/** A variable parsed by `parse`, which answers the rule it broke. The message is the whole line. */
export const variable = <A>(name: Variable, parse: (raw: string) => Either.Either<A, string>): Config.Config<A> =>
  Config.string(name).pipe(
    Config.mapOrFail((raw) =>
      Either.mapLeft(parse(raw), (rule) => ConfigError.InvalidData([], `${name} ${rule}`))
    )
  )

export const oneOf = <const A extends string>(name: Variable, values: ReadonlyArray<A>, rule = `must be one of ${values.join(", ")}`) =>
  variable(name, (raw) =>
    values.includes(raw as A) ? Either.right(raw as A) : Either.left(`${rule} (got ${shown(raw)})`))

const truthy = ["true", "yes", "on", "1"]
const falsy = ["false", "no", "off", "0"]
export const boolean = (name: Variable) =>
  variable(name, (raw) =>
    truthy.includes(raw.toLowerCase())
      ? Either.right(true)
      : falsy.includes(raw.toLowerCase())
      ? Either.right(false)
      : Either.left(`must be true or false (got ${shown(raw)})`))

/** An absolute http(s) URL. */
export const httpUrl = (name: Variable) =>
  variable(name, (raw) =>
    /^https?:\/\/[^/\s]+/i.test(raw) && URL.canParse(raw)
      ? Either.right(raw)
      : Either.left(`must be an absolute http:// or https:// URL (got ${shown(raw)})`))

/** A secret: not empty, and never echoed in a message. */
export const secret = (name: Variable) => variable(name, (raw) => raw.trim().length > 0 ? Either.right(raw.trim()) : Either.left("must not be empty"))

export const nonEmpty = (name: Variable) =>
  variable(name, (raw) => raw.length > 0 ? Either.right(raw) : Either.left("must not be empty"))

const units: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** `500ms`, `10s`, `2m`, `4h`, `30d`, or undefined. */
export const parseDuration = (raw: string): Duration.Duration | undefined => {
  const match = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$/.exec(raw.trim())
  return match === null ? undefined : Duration.millis(Math.round(Number(match[1]) * units[match[2]!]!))
}

/** A whole number from 1 to `max`. */
export const count = (name: Variable, max: number) =>
  variable(name, (raw) => {
    const value = /^\d{1,9}$/.test(raw.trim()) ? Number(raw.trim()) : NaN
    return value >= 1 && value <= max ? Either.right(value) : Either.left(`must be a whole number from 1 to ${max} (got ${shown(raw)})`)
  })

type Bound = readonly [Duration.Duration, string]

/** A duration written as a number and a unit (`500ms`, `10s`, `2m`), from `min` to `max`. */
export const duration = (name: Variable, [min, minLabel]: Bound, [max, maxLabel]: Bound) =>
  variable(name, (raw) => {
    const value = parseDuration(raw)
    return value !== undefined && Duration.between(value, { minimum: min, maximum: max })
      ? Either.right(value)
      : Either.left(
        `must be a duration from ${minLabel} to ${maxLabel}, such as 500ms, 10s or 2m (got ${shown(raw)})`
      )
  })

/** Shortest admin key taken as configuration: it opens every account. */
export const minAdminKeyLength = 32

/**
 * MEDIAGATE_ADMIN_KEY: an admin key given as configuration, at least 32 characters with no
 * spaces (`npm run admin -- key create --admin` prints one of the right shape; any long
 * random string does).
 */
export const adminKey = variable("MEDIAGATE_ADMIN_KEY", (raw) =>
  raw.length >= minAdminKeyLength && !/\s/.test(raw)
    ? Either.right(Redacted.make(raw))
    : Either.left(`must be at least ${minAdminKeyLength} characters with no spaces (npm run admin -- key create --admin makes one)`))

/**
 * The rule between MEDIAGATE_ADMIN_KEY and MEDIAGATE_API_KEY: an admin key is never a
 * customer key (a customer path would take it for the account's), so the two must differ.
 * The problem's line, or none.
 */
export const adminKeyClash = (config: {
  readonly apiKey: Option.Option<string>
  readonly adminKey: Option.Option<Redacted.Redacted<string>>
}): Option.Option<string> =>
  Option.isSome(config.apiKey) && Option.isSome(config.adminKey) && Redacted.value(config.adminKey.value) === config.apiKey.value
    ? Option.some("MEDIAGATE_ADMIN_KEY must differ from MEDIAGATE_API_KEY: an admin key is never a customer key")
    : Option.none()

/**
 * Uploads (`POST /api/v1/files`): the largest file (bytes, default 50,000,000, at most 10^9),
 * how long one lives (default 24h, 1m to 3650d), and uploads a second per account (default 1,
 * burst ten times that; `off` for no limit of their own).
 */
export const uploadSettings = (maxBytes: Variable, retention: Variable, rate: Variable) =>
  Config.all({
    maxBytes: count(maxBytes, 1_000_000_000).pipe(Config.withDefault(50_000_000)),
    retention: duration(retention, [Duration.minutes(1), "1m"], [Duration.days(3650), "3650d"]).pipe(Config.withDefault(Duration.hours(24))),
    rate: variable(rate, (raw) => {
      if (raw.trim().toLowerCase() === "off") return Either.right(Option.none<{ readonly perSecond: number; readonly burst: number }>())
      const value = /^\d{1,6}$/.test(raw.trim()) ? Number(raw.trim()) : NaN
      return value >= 1 ? Either.right(Option.some({ perSecond: value, burst: value * 10 })) : Either.left(`must be uploads a second per account, a whole number from 1, or off (got ${shown(raw)})`)
    }).pipe(Config.withDefault(Option.some({ perSecond: 1, burst: 10 })))
  })
