/**
 * Configuration of the standalone server from the environment (the README lists it).
 * A value that does not parse is reported as one line naming the variable, the values it
 * allows and what it got, so an operator can fix it without reading code.
 */
import { Credits, ModelCatalog } from "@mediagate/core"
import { S3Location } from "@mediagate/media"
import { RequestTimeouts } from "@mediagate/http"
import type { Deployment } from "@mediagate/server"
import { Database } from "@mediagate/store-sql"
import { Replicate } from "@mediagate/upstream"
import { Config, ConfigError, Duration, Either, Option } from "effect"
import type { Redacted } from "effect"
import {
  adminKey,
  boolean,
  count,
  duration,
  httpUrl,
  nonEmpty,
  oneOf,
  parseDuration,
  secret,
  shown,
  uploadSettings,
  variable,
  variables
} from "./ConfigVariables.js"

export { parseDuration, variables } from "./ConfigVariables.js"

/** The simulator's latency profiles. */
export type SimulatorProfile = "instant" | "demo" | "realistic"

/** Everything the standalone server reads from its environment. */
export interface ServerConfig {
  /** 0: a free port the system chooses when the server binds (`listeningOn` then names it). */
  readonly port: number
  readonly host: string
  readonly publicUrl: string
  readonly apiKey: Option.Option<string>
  /** MEDIAGATE_ADMIN_KEY: an admin key beside the stored ones, for the admin API and the console. */
  readonly adminKey: Option.Option<Redacted.Redacted<string>>
  /**
   * Credits (micro-USD) the server's own account gets once, when this server creates it or
   * first sees MEDIAGATE_API_KEY's account; 0 for none. Other accounts start at 0.
   */
  readonly startingCredits: number
  /** How long result files are kept after they were last stored (with a SQL store); none: forever. */
  readonly mediaRetention: Option.Option<Duration.Duration>
  readonly allowPrivateUrls: boolean
  readonly upstream: "simulator"
  readonly simulatorProfile: SimulatorProfile
  readonly databaseUrl: string
  readonly mediaDir: string
  /**
   * Result files in an S3-compatible bucket (MEDIAGATE_MEDIA_URL, `s3://bucket/prefix`) instead
   * of `mediaDir` or memory, with the client from the SDK's AWS_* variables.
   */
  readonly mediaBucket: Option.Option<MediaBucket>
  /** How long a node's claim on a task holds: another node takes over a dead node's tasks after it. */
  readonly lease: Duration.Duration
  /** On SIGTERM, how long the steps in flight may take before they are interrupted and given back. */
  readonly shutdownGrace: Duration.Duration
  /** Tasks running at the upstream at once, over every node on the database. */
  readonly maxRunning: number
  /** Of those, at most this many of one account's. */
  readonly maxRunningPerAccount: number
  /** Of those, at most this many on one provider, by provider name (`*`: every provider not named). */
  readonly maxRunningPerProvider: Readonly<Record<string, number>>
  /**
   * Requests a second each API key may make, its burst, and how long a request waits for the
   * shared buckets (several nodes) before its node decides it alone; none when turned off.
   */
  readonly rateLimit: Option.Option<{ readonly perSecond: number; readonly burst: number; readonly timeout: Duration.Duration }>
  /** Requests held open at once (events streams, `?wait=`): per API key and in total. */
  readonly heldRequests: { readonly perKey: number; readonly total: number }
  /** Failed authentications a minute each client address may have; none when turned off. */
  readonly authFailureLimit: Option.Option<number>
  /** How long a client may take to send a request's headers, then its body (408 past either). */
  readonly requestTimeouts: RequestTimeouts.Settings
  /** Uploads: the largest file, how long one lives, uploads a second per account (none: no limit of their own). */
  readonly uploads?: { readonly maxBytes: number; readonly retention: Duration.Duration; readonly rate: Option.Option<{ readonly perSecond: number; readonly burst: number }> }
  /** Pre-submission moderation: which moderator, and what happens when its backend is down. */
  readonly moderation: ModerationConfig
  /** Deadlines by model family, replacing the models' defaults. */
  readonly deadlines: Readonly<Record<string, Duration.Duration>>
  /** The routes file (MEDIAGATE_ROUTES): models run on real providers. Without it everything runs on the simulator. */
  readonly routes: Option.Option<string>
  /** With a routes file, what runs models it does not route: the simulator, or nothing (their tasks fail). */
  readonly unrouted: "simulator" | "fail"
  /** The providers whose keys are set. */
  readonly providers: ProviderConfig
  /**
   * Whether providers are asked to send webhooks to `<publicUrl>/webhooks/...`: only when
   * MEDIAGATE_PUBLIC_URL is set, since a provider cannot reach the default loopback address.
   */
  readonly webhooks: boolean
  /** The path prefix provider webhooks arrive under. */
  readonly webhookPrefix: string
  /** How log lines are written: Effect's logfmt lines, or one JSON object a line. */
  readonly logFormat: LogFormat
  /** The least severe level logged; `none` logs nothing. */
  readonly logLevel: LogLevelName
  /** Whether `GET /metrics` serves the Prometheus text format (otherwise it is the envelope's 404). */
  readonly metrics: boolean
}

/** MEDIAGATE_MEDIA_URL's bucket and prefix, and how the S3 client reaches the store (AWS_REGION, AWS_ENDPOINT_URL_S3...). */
export interface MediaBucket extends S3Location.Location {
  readonly client: S3Location.ClientOptions
  /** MEDIAGATE_MEDIA_REDIRECT: `proxy` sends the bytes through /media/ (the default); `presigned` answers 302 to a presigned URL. */
  readonly serve: "proxy" | "presigned"
}

/** MEDIAGATE_LOG_FORMAT's values. */
export type LogFormat = "logfmt" | "json"

/** MEDIAGATE_LOG_LEVEL's values. */
export type LogLevelName = "debug" | "info" | "warning" | "error" | "none"

/** The moderator (MEDIAGATE_MODERATION and the variables after it): the deployment's own type. */
export type ModerationConfig = Deployment.ModerationConfig

/** Provider credentials and addresses, from the environment (never from the routes file). */
export type ProviderConfig = Deployment.ProviderConfig

/** The database used when MEDIAGATE_DATABASE_URL is not set. */
export const defaultDatabaseUrl = "sqlite:./data/mediagate.db"

/** A port, or 0 for one the system chooses when the server binds (the banner names it). */
const port = variable("MEDIAGATE_PORT", (raw) => {
  const value = /^\d{1,5}$/.test(raw) ? Number(raw) : NaN
  return value >= 0 && value <= 65535
    ? Either.right(value)
    : Either.left(`must be a whole number from 0 to 65535, 0 for any free port (got ${shown(raw)})`)
})

const allowPrivateUrls = boolean("MEDIAGATE_ALLOW_PRIVATE_URLS")

const publicUrl = httpUrl("MEDIAGATE_PUBLIC_URL")

/**
 * MEDIAGATE_REPLICATE_WEBHOOK_EVENTS: a comma-separated subset of Replicate's events that
 * includes `completed` (the one that ends a task at once; the others only refresh progress).
 */
const replicateWebhookEvents = variable("MEDIAGATE_REPLICATE_WEBHOOK_EVENTS", (raw) => {
  const given = raw.split(",").map((item) => item.trim()).filter((item) => item.length > 0)
  const rule = `must be a comma-separated list of ${Replicate.webhookEvents.join(", ")} that includes completed, such as logs,completed (got ${shown(raw)})`
  if (given.length === 0 || !given.every((item) => (Replicate.webhookEvents as ReadonlyArray<string>).includes(item)) || !given.includes("completed")) {
    return Either.left(rule)
  }
  return Either.right(Replicate.webhookEvents.filter((event) => given.includes(event)))
})

const providers: Config.Config<ProviderConfig> = Config.all({
  fal: Config.option(Config.all({
    key: secret("FAL_KEY"),
    baseUrl: Config.option(httpUrl("MEDIAGATE_FAL_URL")),
    jwksUrl: Config.option(httpUrl("MEDIAGATE_FAL_JWKS_URL"))
  })),
  replicate: Config.option(Config.all({
    token: secret("REPLICATE_API_TOKEN"),
    baseUrl: Config.option(httpUrl("MEDIAGATE_REPLICATE_URL")),
    wait: Config.option(variable("MEDIAGATE_REPLICATE_WAIT", (raw) => {
      const value = /^\d{1,2}$/.test(raw.trim()) ? Number(raw.trim()) : NaN
      return value >= 1 && value <= 60 ? Either.right(value) : Either.left(`must be a whole number of seconds from 1 to 60 (got ${shown(raw)})`)
    })),
    webhookEvents: Config.option(replicateWebhookEvents),
    webhookSecret: Config.option(secret("REPLICATE_WEBHOOK_SECRET"))
  })),
  openai: Config.option(Config.all({ key: secret("OPENAI_API_KEY"), baseUrl: Config.option(httpUrl("MEDIAGATE_OPENAI_URL")) })),
  relay: Config.option(Config.all({
    baseUrl: httpUrl("MEDIAGATE_RELAY_URL"),
    key: secret("MEDIAGATE_RELAY_KEY"),
    webhookSecret: Config.option(secret("MEDIAGATE_RELAY_WEBHOOK_SECRET"))
  }))
})

const moderation: Config.Config<ModerationConfig> = Config.all({
  kind: oneOf("MEDIAGATE_MODERATION", ["local", "openai", "none"]).pipe(Config.withDefault("local" as const)),
  rulesFile: Config.option(variable("MEDIAGATE_MODERATION_RULES", (raw) =>
    raw.trim().length > 0 ? Either.right(raw.trim()) : Either.left("must be the path of a rules file"))),
  baseUrl: Config.option(httpUrl("MEDIAGATE_MODERATION_URL")),
  key: Config.option(secret("MEDIAGATE_MODERATION_KEY")),
  model: Config.option(variable("MEDIAGATE_MODERATION_MODEL", (raw) =>
    raw.trim().length > 0 ? Either.right(raw.trim()) : Either.left("must not be empty"))),
  failOpen: boolean("MEDIAGATE_MODERATION_FAIL_OPEN").pipe(Config.withDefault(false))
}).pipe(
  Config.mapOrFail(({ baseUrl, failOpen, key, kind, model, rulesFile }): Either.Either<ModerationConfig, ConfigError.ConfigError> => {
    if (kind === "openai") {
      return Option.match(key, {
        onNone: () => Either.left(ConfigError.InvalidData([], "MEDIAGATE_MODERATION_KEY must be set when MEDIAGATE_MODERATION is openai")),
        onSome: (value) => Either.right({ moderator: { _tag: "openai", baseUrl, key: value, model }, failOpen })
      })
    }
    if (Option.isSome(rulesFile) && kind !== "local") {
      return Either.left(ConfigError.InvalidData([], `MEDIAGATE_MODERATION_RULES is read only when MEDIAGATE_MODERATION is local (it is ${kind})`))
    }
    return Either.right({ moderator: kind === "local" ? { _tag: "local", rulesFile } : { _tag: "none" }, failOpen })
  })
)

const databaseUrl = variable("MEDIAGATE_DATABASE_URL", (raw) =>
  raw === "memory" || Either.isRight(Database.parseUrl(raw))
    ? Either.right(raw)
    : Either.left(`must be sqlite:<path>, postgres://... or memory (got ${shown(raw)})`))

/** `s3://bucket/prefix`, with the client from AWS_* read only then. */
const mediaBucket: Config.Config<Option.Option<MediaBucket>> = Config.all({
  bucket: Config.option(Config.all({
    location: variable("MEDIAGATE_MEDIA_URL", (raw) => Either.mapLeft(S3Location.parseMediaUrl(raw), (rule) => `${rule} (got ${shown(raw)})`)),
    client: S3Location.clientConfig
  })),
  redirect: Config.option(oneOf("MEDIAGATE_MEDIA_REDIRECT", ["off", "presigned"]))
}).pipe(
  Config.mapOrFail(({ bucket, redirect }): Either.Either<Option.Option<MediaBucket>, ConfigError.ConfigError> =>
    Option.isNone(bucket) && Option.isSome(redirect)
      ? Either.left(ConfigError.InvalidData([], "MEDIAGATE_MEDIA_REDIRECT needs MEDIAGATE_MEDIA_URL: only a bucket can serve its files itself"))
      : Either.right(Option.map(bucket, ({ client, location }) => ({
        ...location,
        client,
        serve: Option.getOrElse(redirect, () => "off") === "presigned" ? "presigned" as const : "proxy" as const
      })))
  )
)

const apiKey = variable("MEDIAGATE_API_KEY", (raw) =>
  raw.length > 0 ? Either.right(raw) : Either.left("must not be empty (unset it to have a key generated)"))

/** Dollars (`10`, `0.50`), or 0 for none. */
const startingCredits = variable("MEDIAGATE_STARTING_CREDITS", (raw) =>
  /^\$?0+(\.0+)?$/.test(raw.trim()) ? Either.right(0) : Credits.parseUsd(raw))

/** The model families of the catalog, which MEDIAGATE_DEADLINES may name. */
const families = [...new Set(ModelCatalog.allModels.map((model) => model.family))]

/** `family=duration` pairs separated by commas: `motion=4h,clip3=20m`. */
const deadlines = variable("MEDIAGATE_DEADLINES", (raw) => {
  const entries: Array<readonly [string, Duration.Duration]> = []
  for (const part of raw.split(",").map((item) => item.trim()).filter((item) => item.length > 0)) {
    const [family = "", after = ""] = part.split("=").map((item) => item.trim())
    const value = parseDuration(after)
    if (!families.includes(family)) {
      return Either.left(`names an unknown model family ${shown(family)}; families: ${families.join(", ")}`)
    }
    if (value === undefined || !Duration.between(value, { minimum: Duration.seconds(10), maximum: Duration.hours(48) })) {
      return Either.left(`must be family=duration pairs such as motion=4h,clip3=20m, each from 10s to 48h (got ${shown(part)})`)
    }
    entries.push([family, value])
  }
  return Either.right(Object.fromEntries(entries))
})

/** The providers the standalone server configures, which MEDIAGATE_MAX_RUNNING_PER_PROVIDER may name. */
const providerNames = ["fal", "replicate", "openai", "relay", "*"]

/** A number for every provider (`50`), or `provider=number` pairs, `*` for the others: `fal=20,*=100`. */
const providerLimits = variable("MEDIAGATE_MAX_RUNNING_PER_PROVIDER", (raw) => {
  const entries: Array<readonly [string, number]> = []
  for (const part of raw.split(",").map((item) => item.trim()).filter((item) => item.length > 0)) {
    const [name, after] = part.includes("=") ? part.split("=").map((item) => item.trim()) : ["*", part]
    const value = /^\d{1,7}$/.test(after ?? "") ? Number(after) : NaN
    if (!providerNames.includes(name ?? "")) {
      return Either.left(`names an unknown provider ${shown(name ?? "")}; providers: ${providerNames.join(", ")}`)
    }
    if (!(value >= 1 && value <= 1_000_000)) {
      return Either.left(`must be a number from 1 to 1000000, or provider=number pairs such as fal=20,*=100 (got ${shown(part)})`)
    }
    entries.push([name!, value])
  }
  return entries.length === 0 ? Either.left("must not be empty") : Either.right(Object.fromEntries(entries))
})

/**
 * Requests a second per key (default 50, `off` for none), the burst (default twice that), and
 * the wait for the shared buckets before a node decides alone (default 1 s, 10 ms to 1 m).
 */
const rateLimit = Config.all({
  perSecond: variable("MEDIAGATE_RATE_LIMIT", (raw) => {
    if (raw.trim().toLowerCase() === "off") return Either.right(null)
    const value = /^\d{1,6}$/.test(raw.trim()) ? Number(raw.trim()) : NaN
    return value >= 1 ? Either.right(value) : Either.left(`must be requests a second per key, a whole number from 1, or off (got ${shown(raw)})`)
  }).pipe(Config.withDefault(50 as number | null)),
  burst: Config.option(count("MEDIAGATE_RATE_LIMIT_BURST", 1_000_000)),
  timeout: duration("MEDIAGATE_RATE_LIMIT_SHARED_TIMEOUT", [Duration.millis(10), "10ms"], [Duration.minutes(1), "1m"]).pipe(
    Config.withDefault(Duration.seconds(1))
  )
}).pipe(
  Config.map(({ burst, perSecond, timeout }) =>
    perSecond === null ? Option.none() : Option.some({ perSecond, burst: Option.getOrElse(burst, () => perSecond * 2), timeout })
  )
)

/** Requests held open at once, per key (default 20) and in all (default 1,000). */
const heldRequests = Config.all({
  perKey: count("MEDIAGATE_MAX_HELD_PER_KEY", 1_000_000).pipe(Config.withDefault(20)),
  total: count("MEDIAGATE_MAX_HELD", 1_000_000).pipe(Config.withDefault(1_000))
})

/** Failed authentications a minute per client address (default 20, `off` for no limit). */
const authFailureLimit = variable("MEDIAGATE_AUTH_FAILURE_LIMIT", (raw) => {
  if (raw.trim().toLowerCase() === "off") return Either.right(Option.none<number>())
  const value = /^\d{1,7}$/.test(raw.trim()) ? Number(raw.trim()) : NaN
  return value >= 1
    ? Either.right(Option.some(value))
    : Either.left(`must be failed authentications a minute per client address, a whole number from 1, or off (got ${shown(raw)})`)
}).pipe(Config.withDefault(Option.some(20)))

/** A request's headers and body: 10 s each by default, 100 ms to 5 m; an upload's body while bytes arrive, up to 10 m (1 s to 1 h). */
const requestTimeouts = Config.all({
  headers: duration("MEDIAGATE_HEADERS_TIMEOUT", [Duration.millis(100), "100ms"], [Duration.minutes(5), "5m"]).pipe(Config.withDefault(Duration.seconds(10))),
  body: duration("MEDIAGATE_BODY_TIMEOUT", [Duration.millis(100), "100ms"], [Duration.minutes(5), "5m"]).pipe(Config.withDefault(Duration.seconds(10))),
  upload: duration("MEDIAGATE_UPLOAD_TIMEOUT", [Duration.seconds(1), "1s"], [Duration.hours(1), "1h"]).pipe(Config.withDefault(RequestTimeouts.defaultUpload))
})

/** Reads MEDIAGATE_* variables. */
export const serverConfig: Config.Config<ServerConfig> = Config.all({
  port: port.pipe(Config.withDefault(8080)),
  host: nonEmpty("MEDIAGATE_HOST").pipe(Config.withDefault("127.0.0.1")),
  publicUrl: Config.option(publicUrl),
  apiKey: Config.option(apiKey),
  adminKey: Config.option(adminKey),
  startingCredits: startingCredits.pipe(Config.withDefault(10_000_000)),
  allowPrivateUrls: allowPrivateUrls.pipe(Config.withDefault(false)),
  upstream: oneOf("MEDIAGATE_UPSTREAM", ["simulator"], "must be simulator; real providers are set up with MEDIAGATE_ROUTES (docs/providers.md)").pipe(
    Config.withDefault("simulator" as const)
  ),
  routes: Config.option(nonEmpty("MEDIAGATE_ROUTES")),
  unrouted: oneOf("MEDIAGATE_UNROUTED", ["simulator", "fail"]).pipe(Config.withDefault("fail" as const)),
  webhookPrefix: variable("MEDIAGATE_WEBHOOK_PREFIX", (raw) =>
    /^(\/[A-Za-z0-9._~-]+)+$/.test(raw) && !raw.startsWith("/api/") && !raw.startsWith("/media")
      ? Either.right(raw)
      : Either.left(`must be a path such as /webhooks or /hooks/providers, outside /api/ and /media (got ${shown(raw)})`)).pipe(
        Config.withDefault("/webhooks")
      ),
  providers,
  simulatorProfile: oneOf("MEDIAGATE_SIMULATOR_PROFILE", ["instant", "demo", "realistic"]).pipe(
    Config.withDefault("demo" as const)
  ),
  databaseUrl: databaseUrl.pipe(Config.withDefault(defaultDatabaseUrl)),
  mediaDir: Config.option(nonEmpty("MEDIAGATE_MEDIA_DIR")),
  mediaBucket,
  mediaRetention: Config.option(duration("MEDIAGATE_MEDIA_RETENTION", [Duration.minutes(1), "1m"], [Duration.days(3650), "3650d"])),
  lease: duration("MEDIAGATE_LEASE", [Duration.seconds(1), "1s"], [Duration.hours(1), "60m"]).pipe(Config.withDefault(Duration.seconds(15))),
  shutdownGrace: duration("MEDIAGATE_SHUTDOWN_GRACE", [Duration.zero, "0s"], [Duration.minutes(10), "10m"]).pipe(
    Config.withDefault(Duration.seconds(10))
  ),
  maxRunning: count("MEDIAGATE_MAX_RUNNING", 1_000_000).pipe(Config.withDefault(500)),
  maxRunningPerAccount: count("MEDIAGATE_MAX_RUNNING_PER_ACCOUNT", 1_000_000).pipe(Config.withDefault(100)),
  maxRunningPerProvider: providerLimits.pipe(Config.withDefault({ "*": 100 })),
  deadlines: deadlines.pipe(Config.withDefault({})),
  rateLimit,
  heldRequests,
  authFailureLimit,
  requestTimeouts,
  uploads: uploadSettings("MEDIAGATE_UPLOAD_MAX_BYTES", "MEDIAGATE_UPLOAD_RETENTION", "MEDIAGATE_UPLOAD_RATE_LIMIT"),
  moderation,
  logFormat: oneOf("MEDIAGATE_LOG_FORMAT", ["logfmt", "json"]).pipe(Config.withDefault("logfmt" as const)),
  logLevel: oneOf("MEDIAGATE_LOG_LEVEL", ["debug", "info", "warning", "error", "none"]).pipe(Config.withDefault("info" as const)),
  metrics: boolean("MEDIAGATE_METRICS").pipe(Config.withDefault(false))
}).pipe(
  Config.mapOrFail((config) =>
    Option.isSome(config.mediaDir) && Option.isSome(config.mediaBucket)
      ? Either.left(ConfigError.InvalidData([], "MEDIAGATE_MEDIA_URL and MEDIAGATE_MEDIA_DIR are both set: files go to a bucket or to a folder, unset one"))
      : Either.right({ ...config, mediaDir: Option.getOrElse(config.mediaDir, () => "./data/media") })
  ),
  Config.map((config) => ({
    ...config,
    webhooks: Option.isSome(config.publicUrl),
    publicUrl: Option.getOrElse(config.publicUrl, () => listenUrl(config)).replace(/\/+$/, "")
  }))
)

/** Where the server listens, as a URL: loopback when it listens on every interface. */
export const listenUrl = (config: Pick<ServerConfig, "host" | "port">) =>
  `http://${config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host}:${config.port}`

/**
 * The configuration once the server listens on `port` (with MEDIAGATE_PORT=0, the one the
 * system chose): a public URL that was the listening address (the default) follows it.
 */
export const listeningOn = <C extends ServerConfig>(config: C, port: number): C => ({
  ...config,
  port,
  publicUrl: config.publicUrl === listenUrl(config) ? listenUrl({ host: config.host, port }) : config.publicUrl
})

/** One line per problem of a configuration error, in the order the variables are read. */
export const configErrorLines = (error: ConfigError.ConfigError): ReadonlyArray<string> =>
  ConfigError.reduceWithContext(error, undefined, {
    andCase: (_, left: ReadonlyArray<string>, right: ReadonlyArray<string>) => [...left, ...right],
    orCase: (_, left: ReadonlyArray<string>, right: ReadonlyArray<string>) => [...left, ...right],
    invalidDataCase: (_, path, message) => [variables.some((name) => message.startsWith(`${name} `)) ? message : `${path.join(".")}: ${message}`],
    missingDataCase: (_, path, message) => [`${path.join(".")}: ${message}`],
    sourceUnavailableCase: (_, path, message) => [`${path.join(".")}: ${message}`],
    unsupportedCase: (_, path, message) => [`${path.join(".")}: ${message}`]
  }).filter((line, index, lines) => lines.indexOf(line) === index)
