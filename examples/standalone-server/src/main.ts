/**
 * `npm start`: the standalone mediagate server.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Ids } from "@mediagate/core"
import { Console, Effect, Layer, Option, Redacted } from "effect"
import { serverConfig } from "./Config.js"
import { layer } from "./Server.js"

const banner = (config: { publicUrl: string; simulatorProfile: string }, key: string, generated: boolean) =>
  [
    "",
    `mediagate listening on ${config.publicUrl} (upstream: simulator, profile: ${config.simulatorProfile}, store: memory)`,
    generated
      ? `API key (generated for this run; set MEDIAGATE_API_KEY to choose one): ${key}`
      : `API key (from MEDIAGATE_API_KEY): ${key}`,
    "",
    "Try it:",
    `  curl -s -X POST ${config.publicUrl}/api/v1/task/submit \\`,
    `    -H 'Authorization: Bearer ${key}' -H 'Content-Type: application/json' \\`,
    `    -d '{"model":"alpha-image-2/text-to-image","input":{"prompt":"a lighthouse at dawn","ratio":"16:9","n":2}}'`,
    `  curl -s ${config.publicUrl}/api/v1/task/<taskId> -H 'Authorization: Bearer ${key}'`,
    ""
  ].join("\n")

const program = Effect.gen(function*() {
  const config = yield* serverConfig
  const generated = Option.isNone(config.apiKey)
  const key = yield* Option.match(config.apiKey, {
    onSome: Effect.succeed,
    onNone: () => Effect.map(Ids.Ids.pipe(Effect.flatMap((ids) => ids.token(24))), (token) => `mg_${token}`)
  }).pipe(Effect.provide(Ids.layer))
  return yield* layer(config, Redacted.make(key)).pipe(
    Layer.tap(() => Console.log(banner(config, key, generated))),
    Layer.launch
  )
})

// Startup failures (a taken port, a bad variable) are one line, not a stack.
NodeRuntime.runMain(
  program.pipe(
    Effect.catchAll((error) =>
      Console.error(`mediagate: cannot start: ${String((error as { message?: string }).message ?? error)}`).pipe(
        Effect.zipRight(Effect.sync(() => process.exit(1)))
      )
    )
  ),
  { disablePrettyLogger: true }
)
