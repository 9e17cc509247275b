/**
 * What `mediagate run` shows on stderr while it waits: a line per status change, and on a
 * terminal a spinner with the time waited. stdout stays for the result.
 */
import type { Task } from "@mediagate/client"
import { Clock, Effect, Ref } from "effect"

const frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

const write = (text: string) => Effect.sync(() => void process.stderr.write(text))

/** A progress display: `onProgress` for the client's run, and `around` to run the wait with the spinner. */
export const make = (interactive: boolean = process.stderr.isTTY === true) =>
  Effect.gen(function*() {
    const status = yield* Ref.make("SUBMITTED")
    const started = yield* Clock.currentTimeMillis

    const clear = interactive ? write("\r\x1b[K") : Effect.void

    const onProgress = (task: Task): Effect.Effect<void> =>
      Effect.zipRight(
        Ref.set(status, task.status),
        Effect.zipRight(clear, write(`${task.taskId} ${task.status}\n`))
      )

    const frame = (count: number) =>
      Effect.gen(function*() {
        const seconds = Math.floor(((yield* Clock.currentTimeMillis) - started) / 1000)
        yield* write(`\r\x1b[K${frames[count % frames.length]} ${yield* Ref.get(status)} ${seconds}s`)
      })

    const spin = Effect.iterate(0, {
      while: () => true,
      body: (count) => frame(count).pipe(Effect.zipRight(Effect.sleep("100 millis")), Effect.as(count + 1))
    })

    /** Runs `effect` with the spinner turning (on a terminal only), and clears it after. */
    const around = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      interactive
        // Forked in the scope, not in an acquire: a fiber forked while uninterruptible could not be stopped.
        ? Effect.scoped(Effect.zipRight(Effect.forkScoped(spin), effect)).pipe(Effect.ensuring(clear))
        : effect

    return { onProgress, around }
  })
