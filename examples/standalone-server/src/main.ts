/**
 * `npm start`: the standalone mediagate server.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Ids } from "@mediagate/core"
import { Webhooks } from "@mediagate/scheduler"
import { SqlAccounts } from "@mediagate/store-sql"
import { Clock, Console, Context, Effect, Layer, Option, Redacted } from "effect"
import type { ServerConfig } from "./Config.js"
import { serverConfig } from "./Config.js"
import { layer, memoryBackends, sqlBackends } from "./Server.js"

/** How the key in use came about, for the banner. */
type KeyOrigin = "environment" | "generated" | "stored"

const banner = (config: ServerConfig, key: Option.Option<string>, origin: KeyOrigin, secret: Option.Option<string>) => {
  const shown = Option.getOrElse(key, () => "<your key>")
  const store = config.databaseUrl === "memory" ? "memory" : config.databaseUrl.replace(/\/\/[^@/]*@/, "//***@")
  return [
    "",
    `mediagate listening on ${config.publicUrl} (upstream: simulator, profile: ${config.simulatorProfile}, store: ${store})`,
    origin === "environment"
      ? `API key (from MEDIAGATE_API_KEY): ${shown}`
      : origin === "generated"
      ? `API key (generated now and shown only this once; keep it, or set MEDIAGATE_API_KEY): ${shown}`
      : "API key: the one printed at the first start (only its hash is stored); or set MEDIAGATE_API_KEY",
    ...Option.match(secret, {
      onNone: () => [],
      onSome: (s) => [`Callback signing secret (Standard Webhooks) of this key's account: ${s}`]
    }),
    "",
    "Try it:",
    `  curl -s -X POST ${config.publicUrl}/api/v1/task/submit \\`,
    `    -H 'Authorization: Bearer ${shown}' -H 'Content-Type: application/json' \\`,
    `    -d '{"model":"alpha-image-2/text-to-image","input":{"prompt":"a lighthouse at dawn","ratio":"16:9","n":2}}'`,
    `  curl -s ${config.publicUrl}/api/v1/task/<taskId> -H 'Authorization: Bearer ${shown}'`,
    ""
  ].join("\n")
}

const newKey = Effect.map(Effect.flatMap(Ids.Ids, (ids) => ids.token(24)), (token) => `mg_${token}`)
const newSecret = Effect.map(Effect.flatMap(Ids.Ids, (ids) => ids.token(24)), Webhooks.secretFromHex)

/** Memory store: the key from the environment, or a new one for this run. */
const runInMemory = (config: ServerConfig) =>
  Effect.gen(function*() {
    const key = Option.isSome(config.apiKey) ? config.apiKey.value : yield* newKey
    const secret = yield* newSecret
    const backends = memoryBackends(config, [
      { id: "acct_default", name: "default", apiKey: Redacted.make(key), webhookSecret: Redacted.make(secret) }
    ])
    return yield* layer(config, backends).pipe(
      Layer.tap(() =>
        Console.log(banner(config, Option.some(key), Option.isSome(config.apiKey) ? "environment" : "generated", Option.some(secret)))
      ),
      Layer.launch
    )
  })

/**
 * SQL store: MEDIAGATE_API_KEY names an account (created if new); without it the first
 * start creates an account and prints its key once.
 */
const runOnSql = (config: ServerConfig) =>
  Effect.scoped(
    Effect.gen(function*() {
      const backends = sqlBackends(config)
      const built = yield* Layer.build(Layer.mergeAll(backends.store, backends.accounts))
      const accounts = Context.get(built, SqlAccounts.SqlAccountsService)
      const now = yield* Clock.currentTimeMillis
      let key: Option.Option<string> = Option.none()
      let origin: KeyOrigin = "stored"
      let secret: Option.Option<string> = Option.none()
      const webhookSecret = Redacted.make(yield* newSecret)
      if (Option.isSome(config.apiKey)) {
        const hash = SqlAccounts.hashKey(config.apiKey.value)
        const account = yield* accounts.ensure({ id: Ids.AccountId.make(`acct_${hash.slice(0, 16)}`), name: "default", apiKey: Redacted.make(config.apiKey.value), webhookSecret, now })
        key = config.apiKey
        origin = "environment"
        secret = Option.map(yield* accounts.webhookSecret(account.id), Redacted.value)
      } else if ((yield* accounts.count) === 0) {
        const generated = yield* newKey
        const account = yield* accounts.ensure({ id: Ids.AccountId.make("acct_default"), name: "default", apiKey: Redacted.make(generated), webhookSecret, now })
        key = Option.some(generated)
        origin = "generated"
        secret = Option.map(yield* accounts.webhookSecret(account.id), Redacted.value)
      }
      const reuse = { ...backends, store: Layer.succeedContext(built), accounts: Layer.succeedContext(built) } as const
      return yield* layer(config, reuse).pipe(
        Layer.tap(() => Console.log(banner(config, key, origin, secret))),
        Layer.launch
      )
    })
  )

const program = Effect.gen(function*() {
  const config = yield* serverConfig
  return yield* (config.databaseUrl === "memory" ? runInMemory(config) : runOnSql(config))
}).pipe(Effect.provide(Ids.layer))

/** One line for a startup failure: its message, or its cause's, or its tag. */
const describe = (error: unknown): string => {
  const e = error as { message?: string; _tag?: string; cause?: { message?: string; code?: string } }
  return e.message || e.cause?.message || e.cause?.code || e._tag || String(error)
}

// Startup failures (a taken port, a database that cannot be opened) are one line, not a stack.
NodeRuntime.runMain(
  program.pipe(
    Effect.catchAll((error) =>
      Console.error(`mediagate: cannot start: ${describe(error)}`).pipe(
        Effect.zipRight(Effect.sync(() => process.exit(1)))
      )
    )
  ),
  { disablePrettyLogger: true }
)
