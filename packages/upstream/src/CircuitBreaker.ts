/**
 * A circuit breaker per provider target, in this process's memory: each node learns an
 * outage from its own calls and is never stopped by another node's view (not shared by
 * design, docs/decisions.md "Circuit breakers stay per node"). It opens after `threshold` transient failures in a
 * row; while open, new jobs are refused without a call (the engine moves them to the next
 * target at once). After `coolDown` it half-opens: one call goes through as a trial, and its
 * outcome closes the circuit or opens it again. Any answer of the provider, even a permanent
 * refusal, shows the provider is up and closes it. Time is Effect's Clock.
 */
import { UpstreamError } from "@mediagate/core"
import { Clock, Duration, Effect } from "effect"

export interface Options {
  /** Transient failures in a row that open the circuit. Default 5. */
  readonly threshold?: number
  /** How long it stays open before one trial call. Default 30 s. */
  readonly coolDown?: Duration.DurationInput
}

type State =
  | { readonly _tag: "Closed"; readonly failures: number }
  | { readonly _tag: "Open"; readonly until: number }
  | { readonly _tag: "HalfOpen" }

/** The state of a circuit as tests and logs see it. */
export type Status = State["_tag"]

export interface CircuitBreaker {
  /**
   * Runs `call` through the circuit of `target`. Refused while open (`circuitOpen`), and
   * while a half-open trial is running; `gate: false` runs it whatever the state (polls of
   * jobs already accepted) and only counts its outcome.
   */
  readonly run: <A>(target: string, call: Effect.Effect<A, UpstreamError>, gate?: boolean) => Effect.Effect<A, UpstreamError>
  readonly status: (target: string) => Effect.Effect<Status>
  /**
   * The circuit of `target` as the providers page shows it: open until its cool-down ends,
   * half-open from then (the next gated call is a trial) and while a trial runs.
   */
  readonly view: (target: string) => Effect.Effect<{ readonly state: "closed" | "open" | "half-open"; readonly until: number | null }>
}

export const make = (options: Options = {}): CircuitBreaker => {
  const threshold = options.threshold ?? 5
  const coolDown = Duration.toMillis(options.coolDown ?? "30 seconds")
  const states = new Map<string, State>()
  const get = (target: string): State => states.get(target) ?? { _tag: "Closed", failures: 0 }

  const admit = (target: string, now: number): "call" | "trial" | "refuse" => {
    const state = get(target)
    if (state._tag === "Closed") return "call"
    if (state._tag === "HalfOpen") return "refuse"
    if (now < state.until) return "refuse"
    states.set(target, { _tag: "HalfOpen" })
    return "trial"
  }

  const record = (target: string, transient: boolean, now: number) => {
    const state = get(target)
    if (!transient) return states.set(target, { _tag: "Closed", failures: 0 })
    if (state._tag === "HalfOpen") return states.set(target, { _tag: "Open", until: now + coolDown })
    const failures = state._tag === "Closed" ? state.failures + 1 : threshold
    states.set(target, failures >= threshold ? { _tag: "Open", until: now + coolDown } : { _tag: "Closed", failures })
  }

  return {
    run: (target, call, gate = true) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const admitted = gate ? admit(target, now) : "call"
        if (admitted === "refuse") {
          return yield* Effect.fail(
            new UpstreamError({ message: `${target} is unavailable (its circuit is open after repeated failures)`, reason: null, retryable: true, circuitOpen: true })
          )
        }
        return yield* call.pipe(
          Effect.tapBoth({
            onFailure: (error) => Effect.flatMap(Clock.currentTimeMillis, (at) => Effect.sync(() => record(target, error.retryable, at))),
            onSuccess: () => Effect.flatMap(Clock.currentTimeMillis, (at) => Effect.sync(() => record(target, false, at)))
          }),
          // A trial that was interrupted (a timeout) counts as a transient failure.
          Effect.onInterrupt(() => Effect.flatMap(Clock.currentTimeMillis, (at) => Effect.sync(() => record(target, true, at))))
        )
      }),
    status: (target) => Effect.sync(() => get(target)._tag),
    view: (target) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const state = get(target)
        return state._tag === "Closed"
          ? { state: "closed" as const, until: null }
          : state._tag === "Open" && now < state.until
          ? { state: "open" as const, until: state.until }
          : { state: "half-open" as const, until: null }
      })
  }
}
