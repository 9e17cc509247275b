/**
 * Counts of the Effect runtime's work, for benchmarks of the engine (`bench/engine.ts`,
 * `BENCH_COUNT=1`): fibers started, Effect steps run (the runtime's ops, through a
 * Supervisor's `onEffect` with op supervision on) and FiberRef writes (each a copy of the
 * fiber's map of refs: a service provided, a value set locally, a log annotation, a span).
 *
 * Fibers and steps are counted for the effect `counted` wraps and every fiber it forks
 * (children inherit the supervisor and the runtime flags). FiberRef writes cannot be told
 * apart by fiber this way: `FiberRuntime`'s methods are wrapped for the whole process while
 * the count is on (`start`/`stop`), so nothing else may run meanwhile.
 */
import { Effect, RuntimeFlags, RuntimeFlagsPatch, Supervisor } from "effect"
import type { Context, Exit, Fiber, Option } from "effect"

/** What was counted. */
export interface Counts {
  fibers: number
  steps: number
  fiberRefWrites: number
}

class Counting extends Supervisor.AbstractSupervisor<void> {
  constructor(readonly counts: Counts, readonly steps: boolean) {
    super()
  }
  override get value() {
    return Effect.void
  }
  override onStart<A, E, R>(_context: Context.Context<R>, _effect: Effect.Effect<A, E, R>, _parent: Option.Option<Fiber.RuntimeFiber<any, any>>, _fiber: Fiber.RuntimeFiber<A, E>) {
    this.counts.fibers++
  }
  override onEnd<A, E>(_value: Exit.Exit<A, E>, _fiber: Fiber.RuntimeFiber<A, E>) {}
  override onEffect<A, E>(_fiber: Fiber.RuntimeFiber<A, E>, _effect: Effect.Effect<any, any, any>) {
    if (this.steps) this.counts.steps++
  }
}

/** A counter: `counted(effect)` counts its fibers (and steps, when `steps`); `start`/`stop` bound the FiberRef count. */
export const make = Effect.gen(function*() {
  const counts: Counts = { fibers: 0, steps: 0, fiberRefWrites: 0 }
  type Method = (...args: Array<unknown>) => unknown
  const prototype = (yield* Effect.withFiberRuntime((fiber) => Effect.succeed(Object.getPrototypeOf(fiber)))) as {
    setFiberRef: Method
    setFiberRefs: Method
  }
  const originals = { setFiberRef: prototype.setFiberRef, setFiberRefs: prototype.setFiberRefs }
  const counting = new Counting(counts, true)
  return {
    counts,
    counted: <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      effect.pipe(
        Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision)),
        Effect.supervised(counting)
      ),
    start: () => {
      counts.fibers = counts.steps = counts.fiberRefWrites = 0
      prototype.setFiberRef = function(this: unknown, ...args: Array<unknown>) {
        counts.fiberRefWrites++
        return originals.setFiberRef.apply(this, args)
      }
      prototype.setFiberRefs = function(this: unknown, ...args: Array<unknown>) {
        counts.fiberRefWrites++
        return originals.setFiberRefs.apply(this, args)
      }
    },
    stop: () => {
      prototype.setFiberRef = originals.setFiberRef
      prototype.setFiberRefs = originals.setFiberRefs
      return { ...counts }
    }
  }
})
