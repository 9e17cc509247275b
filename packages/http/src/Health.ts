/**
 * Liveness and readiness for load balancers and orchestrators, outside /api/v1/ and without
 * a key: `/healthz` answers 200 while the process serves; `/readyz` answers 200 when every
 * readiness check passes and 503 naming the checks that failed. Both in the envelope.
 *
 * Readiness is a swappable service (`Readiness`). Without one in context the default checks
 * the task store by a cheap read (a store whose migrations have not run fails it: its tables
 * are missing) and, when the host provides `EngineStatus`, that the engine is running.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Ids, TaskStore } from "@mediagate/core"
import { Context, Duration, Effect, Layer, Option } from "effect"
import { envelope } from "./EnvelopeMiddleware.js"
import { healthPath, readyPath } from "./Paths.js"

/** The outcome of one readiness check. */
export interface CheckResult {
  readonly name: string
  readonly ok: boolean
  readonly message: string
}

/** A named readiness check: succeeds with a message when ready, fails with the reason otherwise. */
export interface Check {
  readonly name: string
  readonly run: Effect.Effect<string, string>
}

/** What `/readyz` asks. */
export class Readiness extends Context.Tag("@mediagate/http/Readiness")<Readiness, {
  /** Every check's outcome; the server is ready when all are ok. */
  readonly check: Effect.Effect<ReadonlyArray<CheckResult>>
}>() {}

/**
 * Whether the lifecycle engine of this process is running, for hosts that run one. Without
 * it in context, readiness does not check the engine.
 */
export class EngineStatus extends Context.Tag("@mediagate/http/EngineStatus")<EngineStatus, {
  /** Running: `true`; stopped or crashed: `false`. */
  readonly running: Effect.Effect<boolean>
}>() {}

/** How long a check may take before it counts as failed. */
export const checkTimeout = Duration.seconds(2)

/** Runs a check within `checkTimeout`; a failure, defect or timeout is a failed check with its reason. */
export const runCheck = (check: Check): Effect.Effect<CheckResult> =>
  check.run.pipe(
    Effect.timeoutFail({ duration: checkTimeout, onTimeout: () => `did not answer within ${Duration.format(checkTimeout)}` }),
    Effect.match({
      onFailure: (message) => ({ name: check.name, ok: false, message }),
      onSuccess: (message) => ({ name: check.name, ok: true, message })
    }),
    Effect.catchAllDefect((defect) =>
      Effect.logWarning(`mediagate: readiness check ${check.name} failed`, defect).pipe(
        Effect.as({ name: check.name, ok: false, message: defect instanceof Error ? defect.message : String(defect) })
      )
    )
  )

/** Readiness from a list of checks, run concurrently. */
export const make = (checks: ReadonlyArray<Check>): Context.Tag.Service<Readiness> => ({
  check: Effect.forEach(checks, runCheck, { concurrency: "unbounded" })
})

/** A layer of `make(checks)`. */
export const layer = (checks: ReadonlyArray<Check>): Layer.Layer<Readiness> => Layer.succeed(Readiness, make(checks))

/** An id no task has: reading it touches the store's tables without finding anything. */
const probeId = Ids.TaskId.make("00000000-0000-7000-8000-000000000000")

/** The store answers a read by id (its tables exist, so its migrations ran). */
export const storeCheck = (store: Context.Tag.Service<TaskStore.TaskStore>): Check => ({
  name: "store",
  run: store.get(probeId).pipe(Effect.as("reachable; schema migrated"), Effect.mapError((error) => error.message))
})

/** The engine says it is running. */
export const engineCheck = (engine: Context.Tag.Service<EngineStatus>): Check => ({
  name: "engine",
  run: Effect.flatMap(engine.running, (running) => (running ? Effect.succeed("running") : Effect.fail("not running")))
})

/**
 * The default checks from what the context holds: the task store (failing when the
 * composition does not expose one, so a misconfigured host is not reported ready) and the
 * engine when `EngineStatus` is given.
 */
export const defaultChecks: Effect.Effect<ReadonlyArray<Check>> = Effect.gen(function*() {
  // Optional by nature: readiness reports what the host composed; a missing store fails the check, so it is never ready by accident.
  const store = yield* Effect.serviceOption(TaskStore.TaskStore)
  // Optional by nature: a node without an engine (an API-only node) has no engine to report.
  const engine = yield* Effect.serviceOption(EngineStatus)
  return [
    Option.match(store, {
      onNone: (): Check => ({ name: "store", run: Effect.fail("no TaskStore in the HTTP layer's context; provide Health.Readiness") }),
      onSome: storeCheck
    }),
    ...Option.match(engine, { onNone: () => [], onSome: (status) => [engineCheck(status)] })
  ]
})

/** `/healthz` and `/readyz`. Readiness is the `Readiness` in context, else `defaultChecks`. */
export const routes: Layer.Layer<never> = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    // Optional by nature: a host's own readiness checks replace the defaults only when it gives some.
    const readiness = yield* Effect.serviceOption(Readiness).pipe(
      Effect.flatMap(Option.match({ onNone: () => Effect.map(defaultChecks, make), onSome: Effect.succeed }))
    )
    yield* router.get(healthPath, Effect.succeed(envelope(0, "ok", { status: "up" }, { "cache-control": "no-store" })))
    yield* router.get(
      readyPath,
      Effect.map(readiness.check, (checks) => {
        const failed = checks.filter((check) => !check.ok)
        return failed.length === 0
          ? envelope(0, "ok", { status: "ready", checks }, { "cache-control": "no-store" })
          : envelope(
            503,
            `not ready: ${failed.map((check) => `${check.name} (${check.message})`).join(", ")}`,
            { status: "not_ready", checks },
            { "cache-control": "no-store" }
          )
      })
    )
  })
)
