/**
 * `npm start`: the standalone mediagate server. On SIGTERM (or SIGINT) it stops: it closes
 * its listening socket at once (no new connections), the engine claims nothing more and its
 * steps in flight get MEDIAGATE_SHUTDOWN_GRACE to finish before they are interrupted and
 * their tasks given back to the store for other nodes; then the process exits 0.
 */
import { NodeRuntime } from "@effect/platform-node"
import { ApiKeys, Ids, Ledger } from "@mediagate/core"
import { Webhooks } from "@mediagate/scheduler"
import { Backends } from "@mediagate/server"
import { SqlBackends } from "@mediagate/server/sql"
import { SqlAccounts } from "@mediagate/store-sql"
import { RoutesFile } from "@mediagate/upstream"
import { Clock, Console, ConfigError, Context, Duration, Effect, Layer, Option, Redacted } from "effect"
import { mkdirSync } from "node:fs"
import { createServer } from "node:http"
import type { ServerConfig } from "./Config.js"
import { configErrorLines, defaultDatabaseUrl, listeningOn, listenUrl, serverConfig } from "./Config.js"
import { adminKeyClash } from "./ConfigVariables.js"
import * as Logging from "./Logging.js"
import * as Telemetry from "./Telemetry.js"
import type { Listening, Routing } from "./Server.js"
import { bindNow, bucketMedia, layer, loadRoutes, server } from "./Server.js"

/**
 * What the banner may say about the key and the signing secret. A secret is shown once,
 * at the start that generated it; a key the operator supplied is never echoed, so it does
 * not end up in logs.
 */
interface Credentials {
  readonly key:
    | { readonly _tag: "Generated"; readonly value: string }
    | { readonly _tag: "Environment" }
    | { readonly _tag: "Stored" }
  /** The account's signing secret, when it was generated at this start. */
  readonly newSecret: Option.Option<string>
}

const notAgain = "it cannot be shown again here; `npm run admin -- secret show <account-id>` shows it, `secret rotate` replaces it"

/** What runs the models, for the banner. */
const upstreamLine = (config: ServerConfig, routing: Routing | undefined) =>
  routing === undefined
    ? `upstream: simulator, profile: ${config.simulatorProfile}`
    : `upstream: routes from ${Option.getOrElse(config.routes, () => "")}; other models: ${
      routing.unrouted === "simulator" ? `simulator (${config.simulatorProfile})` : "fail"
    }`

const banner = (config: ServerConfig, credentials: Credentials, routing: Routing | undefined) => {
  const { key } = credentials
  const shown = key._tag === "Generated" ? key.value : key._tag === "Environment" ? "<your MEDIAGATE_API_KEY>" : "<your key>"
  const store = config.databaseUrl === "memory" ? "memory" : config.databaseUrl.replace(/\/\/[^@/]*@/, "//***@")
  return [
    "",
    `mediagate listening on ${listenUrl(config)} (${
      config.publicUrl === listenUrl(config) ? "" : `public URL: ${config.publicUrl}, `
    }${upstreamLine(config, routing)}, store: ${store}${
      Option.match(config.mediaBucket, { onNone: () => "", onSome: ({ bucket, prefix }) => `, media: s3://${bucket}/${prefix}` })
    })`,
    ...(config.allowPrivateUrls
      ? ["warning: MEDIAGATE_ALLOW_PRIVATE_URLS is on: callbacks and media fetches may reach localhost and private addresses (development and tests only)"]
      : []),
    key._tag === "Environment"
      ? "API key: the one in MEDIAGATE_API_KEY"
      : key._tag === "Generated"
      ? `API key (generated now and shown only this once; keep it, or set MEDIAGATE_API_KEY): ${key.value}`
      : "API key: the one printed at the first start (only its hash is stored); or set MEDIAGATE_API_KEY",
    Option.match(credentials.newSecret, {
      onSome: (secret) => `Callback signing secret (Standard Webhooks), generated now and shown only this once: ${secret}`,
      onNone: () => `Callback signing secret: printed at the start that created this account; ${notAgain}`
    }),
    // Said only when set: the key itself is never printed.
    ...(Option.isSome(config.adminKey) ? ["Admin API (/api/v1/admin/...) and console: the admin key in MEDIAGATE_ADMIN_KEY"] : []),
    "",
    "Try it:",
    `  curl -s -X POST ${config.publicUrl}/api/v1/task/submit \\`,
    `    -H 'Authorization: Bearer ${shown}' -H 'Content-Type: application/json' \\`,
    `    -d '{"model":"alpha-image-2/text-to-image","input":{"prompt":"a lighthouse at dawn","ratio":"16:9","n":2}}'`,
    `  curl -s ${config.publicUrl}/api/v1/task/<taskId> -H 'Authorization: Bearer ${shown}'`,
    ""
  ].join("\n")
}

/** The configuration with what is exported over OTLP. */
type Configured = ServerConfig & { readonly telemetry: Telemetry.TelemetryConfig }

/** The process's HTTP server, closed first when the process is told to stop. */
const http = createServer()

/** The grace period of this run, once the configuration is read. */
let shutdownGrace = Duration.seconds(10)

/** Past the grace period, the rest of the shutdown (giving leases back, closing connections) gets this long. */
const teardownMargin = Duration.seconds(5)

/**
 * First on a stop signal (before the runtime interrupts the program, which closes the
 * engine, the deliverer and the store in order): refuse new connections and close idle
 * ones. Should anything hang past the grace period and the margin, the process exits 1.
 */
const stopOnSignal = (signal: NodeJS.Signals) => {
  process.removeListener("SIGTERM", stopOnSignal)
  process.removeListener("SIGINT", stopOnSignal)
  console.log(`mediagate: ${signal}: stopping (steps in flight get ${Duration.format(shutdownGrace)})`)
  http.close()
  setTimeout(() => {
    console.error(`mediagate: did not stop within ${Duration.format(Duration.sum(shutdownGrace, teardownMargin))}; exiting`)
    process.exit(1)
  }, Duration.toMillis(Duration.sum(shutdownGrace, teardownMargin))).unref()
}
process.on("SIGTERM", stopOnSignal)
process.on("SIGINT", stopOnSignal)

/**
 * The HTTP server of this run, and the configuration naming its port. MEDIAGATE_PORT=0 binds
 * it now: the port is the system's choice, and the services are built with the public URL
 * that names it. A given port is known from the start, so the server binds with the services.
 */
const listen = (config: Configured) =>
  config.port === 0
    ? Effect.map(bindNow(config, http), ({ listening, port }) => ({ config: listeningOn(config, port), listening }))
    : Effect.succeed({ config, listening: server(config, http) })

/** Serves until interrupted (a stop signal), then says so once everything is closed. */
const serve = <E, R>(app: Layer.Layer<never, E, R>, config: Configured, credentials: Credentials, routing: Routing | undefined) =>
  app.pipe(
    Layer.tap(() => Console.log(banner(config, credentials, routing))),
    // OTLP export when the OTEL_* variables ask for it (Telemetry.ts); otherwise no tracer,
    // since spans made for nobody cost a tenth of the CPU under load (docs/benchmarks.md).
    Layer.provide(Telemetry.layer(config.telemetry)),
    Layer.launch,
    Effect.onInterrupt(() => Console.log("mediagate: stopped"))
  )

const token = (bytes: number) => Effect.flatMap(Ids.Ids, (ids) => ids.token(bytes))
const newKey = Effect.map(ApiKeys.generate, Redacted.value)
const newSecret = Effect.map(token(24), Webhooks.secretFromHex)
// Random, so a task row says nothing about its owner's key.
const newAccountId = Effect.map(token(12), (value) => Ids.AccountId.make(`acct_${value}`))

/** Memory store: the key from the environment, or a new one for this run; a new secret every run. */
const runInMemory = (config: Configured, listening: Listening, routing: Routing | undefined) =>
  Effect.gen(function*() {
    const key = Option.isSome(config.apiKey) ? config.apiKey.value : yield* newKey
    const secret = yield* newSecret
    const media = yield* bucketMedia(config)
    const backends = {
      ...Backends.memoryBackends(config, [
        { id: yield* newAccountId, name: "default", apiKey: Redacted.make(key), webhookSecret: Redacted.make(secret), credits: config.startingCredits }
      ]),
      ...Option.match(media, { onNone: () => ({}), onSome: (layer) => ({ media: layer }) })
    }
    const credentials: Credentials = {
      key: Option.isSome(config.apiKey) ? { _tag: "Environment" } : { _tag: "Generated", value: key },
      newSecret: Option.some(secret)
    }
    return yield* serve(layer({ ...config, stepSpans: config.telemetry.traces, ...(routing === undefined ? {} : { routing }) }, backends, listening), config, credentials, routing)
  })

/**
 * SQL store: MEDIAGATE_API_KEY names an account (created if new); without it the first
 * start creates an account and prints its key once.
 */
const runOnSql = (config: Configured, listening: Listening, routing: Routing | undefined) =>
  Effect.scoped(
    Effect.gen(function*() {
      // The default folder is ours to create; any other path must exist (a typo should not make folders).
      if (config.databaseUrl === defaultDatabaseUrl) yield* Effect.sync(() => mkdirSync("./data", { recursive: true }))
      const media = yield* bucketMedia(config)
      const backends = SqlBackends.make({ ...config, ...Option.match(media, { onNone: () => ({}), onSome: (layer) => ({ media: layer }) }) })
      const built = yield* Layer.build(Layer.mergeAll(backends.store, backends.accounts, backends.ledger))
      const accounts = Context.get(built, SqlAccounts.SqlAccountsService)
      const ledger = Context.get(built, Ledger.Ledger)
      const now = yield* Clock.currentTimeMillis
      const secret = yield* newSecret
      /** Ensures the account; the secret is new if the account now holds the one made at this start. */
      const ensure = (apiKey: string, keyLabel: string) =>
        Effect.gen(function*() {
          const account = yield* accounts.ensure({
            id: yield* newAccountId,
            name: "default",
            apiKey: Redacted.make(apiKey),
            keyLabel,
            webhookSecret: Redacted.make(secret),
            now
          })
          // Once per account, ever: the entry's id names the account, and a credit is written once per id.
          if (config.startingCredits > 0) {
            yield* ledger.credit({ id: `starting-credits:${account.id}`, accountId: account.id, amount: config.startingCredits, at: now, note: "starting credits" })
          }
          const stored = yield* accounts.webhookSecret(account.id)
          return Option.filter(Option.map(stored, Redacted.value), (value) => value === secret)
        })
      let credentials: Credentials = { key: { _tag: "Stored" }, newSecret: Option.none() }
      if (Option.isSome(config.apiKey)) {
        credentials = { key: { _tag: "Environment" }, newSecret: yield* ensure(config.apiKey.value, "from MEDIAGATE_API_KEY") }
      } else if ((yield* accounts.count) === 0) {
        const generated = yield* newKey
        credentials = { key: { _tag: "Generated", value: generated }, newSecret: yield* ensure(generated, "generated at first start") }
      }
      const reuse = { ...backends, store: Layer.succeedContext(built), accounts: Layer.succeedContext(built), ledger: Layer.succeedContext(built) } as const
      return yield* serve(layer({ ...config, stepSpans: config.telemetry.traces, ...(routing === undefined ? {} : { routing }) }, reuse, listening), config, credentials, routing)
    })
  )

const program = Effect.gen(function*() {
  const read = yield* serverConfig
  const clash = adminKeyClash(read)
  if (Option.isSome(clash)) return yield* Effect.fail(new Error(clash.value))
  const { config, listening } = yield* listen({ ...read, telemetry: yield* Telemetry.telemetryConfig })
  shutdownGrace = config.shutdownGrace
  const routing: Routing | undefined = Option.isNone(config.routes)
    ? undefined
    : {
      routes: yield* loadRoutes(config.routes.value, config.providers),
      unrouted: config.unrouted,
      providers: config.providers,
      ...(config.webhooks ? { webhookBaseUrl: `${config.publicUrl}${config.webhookPrefix}` } : {})
    }
  // Everything from here logs in the configured format and level (MEDIAGATE_LOG_FORMAT, MEDIAGATE_LOG_LEVEL).
  return yield* (config.databaseUrl === "memory" ? runInMemory(config, listening, routing) : runOnSql(config, listening, routing)).pipe(
    Effect.provide(Logging.layer(config))
  )
}).pipe(Effect.scoped, Effect.provide(Ids.layer))

/** One line per startup problem: each bad variable, or the failure's message, its cause's, or its tag. */
const describe = (error: unknown): ReadonlyArray<string> => {
  if (ConfigError.isConfigError(error)) return configErrorLines(error)
  // A routes file's problems, one line each.
  if (error instanceof RoutesFile.RoutesFileError) return error.message.split("\n")
  const e = error as { message?: string; _tag?: string; cause?: { message?: string; code?: string } }
  return [e.message || e.cause?.message || e.cause?.code || e._tag || String(error)]
}

// Startup failures (a bad variable, a taken port, a database that cannot be opened) are lines, not a stack.
NodeRuntime.runMain(
  program.pipe(
    Effect.catchAll((error) =>
      Effect.forEach(describe(error), (line) => Console.error(`mediagate: cannot start: ${line}`)).pipe(
        Effect.zipRight(Effect.sync(() => process.exit(1)))
      )
    )
  ),
  { disablePrettyLogger: true }
)
