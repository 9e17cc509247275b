/**
 * What `mediagate run` shows on stderr while it waits: a line per status change, and on a
 * terminal a progress line redrawn in place (carriage return): a spinner, the status, what
 * the server says of the task's progress (its place in the upstream's queue, a bar with its
 * percent, the result being copied) and the time waited. Once the task has ended its status
 * line is the last word: nothing is drawn after it (a task keeps its last progress at the
 * end, which would read as still running). Piped (not a terminal) it prints only the status
 * lines: no spinner, no progress. stdout stays for the result.
 */
import { type Task, terminalStatuses } from "@mediagate/client"
import { Clock, Effect, Ref } from "effect"

const frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

/** Where the display writes: stderr, or a fake in tests. */
export interface Output {
  readonly write: (text: string) => unknown
}

/** A task's progress as the server shows it. */
type WireProgress = NonNullable<Task["progress"]>

/** Width of the percent bar, in characters. */
const barWidth = 20

/** The progress part of the line: `queued #3`, `running [#####···············] 25%`, `finishing`; empty when nothing is known. */
export const describe = (progress: WireProgress | null): string => {
  if (progress === null) return ""
  switch (progress.stage) {
    case "queued":
      return progress.queue_position === null ? "queued" : `queued #${progress.queue_position}`
    case "running": {
      if (progress.percent === null) return "running"
      const filled = Math.round((Math.min(100, Math.max(0, progress.percent)) / 100) * barWidth)
      return `running [${"#".repeat(filled)}${"·".repeat(barWidth - filled)}] ${Math.floor(progress.percent)}%`
    }
    case "finishing":
      return "finishing (copying results)"
  }
}

/** A progress display: `onProgress` for the client's run, and `around` to run the wait with the spinner. */
export const make = (interactive: boolean = process.stderr.isTTY === true, output: Output = process.stderr) =>
  Effect.gen(function*() {
    const write = (text: string) => Effect.sync(() => void output.write(text))
    const status = yield* Ref.make("SUBMITTED")
    const progress = yield* Ref.make<WireProgress | null>(null)
    const count = yield* Ref.make(0)
    const printed = yield* Ref.make<string | null>(null)
    const started = yield* Clock.currentTimeMillis

    const clear = interactive ? write("\r\x1b[K") : Effect.void

    /** Redraws the line in place: spinner, status, progress, seconds waited; nothing once the task has ended. */
    const draw = Effect.gen(function*() {
      const now = yield* Ref.get(status)
      if (terminalStatuses.has(now)) return
      const seconds = Math.floor(((yield* Clock.currentTimeMillis) - started) / 1000)
      const frame = frames[(yield* Ref.getAndUpdate(count, (n) => n + 1)) % frames.length]
      const told = describe(yield* Ref.get(progress))
      yield* write(`\r\x1b[K${frame} ${now}${told === "" ? "" : ` ${told}`} ${seconds}s`)
    })

    const onProgress = (task: Task): Effect.Effect<void> =>
      Effect.gen(function*() {
        yield* Ref.set(status, task.status)
        yield* Ref.set(progress, task.progress ?? null)
        const before = yield* Ref.getAndSet(printed, task.status)
        // A change of status is a line of its own, as when piped; a change of progress only redraws.
        if (before !== task.status) yield* Effect.zipRight(clear, write(`${task.taskId} ${task.status}\n`))
        if (interactive) yield* draw
      })

    const spin = Effect.forever(draw.pipe(Effect.zipRight(Effect.sleep("100 millis"))))

    /** Runs `effect` with the spinner turning (on a terminal only), and clears it after. */
    const around = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      interactive
        // Forked in the scope, not in an acquire: a fiber forked while uninterruptible could not be stopped.
        ? Effect.scoped(Effect.zipRight(Effect.forkScoped(spin), effect)).pipe(Effect.ensuring(clear))
        : effect

    return { onProgress, around }
  })
