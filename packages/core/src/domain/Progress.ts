/**
 * A task's progress (additive to the spec; docs/decisions.md "Progress"): what an upstream
 * said of a running job, folded into what the task keeps, bounded and throttled. Pure.
 */
import type { UpstreamProgress } from "../services/Upstream.js"
import type { ProgressStage, TaskProgress } from "./Task.js"

/** Bounds of `logs_tail`: lines kept, characters per line, characters in all. */
export const bounds = { lines: 20, lineChars: 500, totalChars: 4096 } as const

/** A progress-only change is written at most once per this many milliseconds per task. */
export const throttleMillis = 500

const clip = (line: string): string => (line.length > bounds.lineChars ? line.slice(0, bounds.lineChars) : line)

/** The last lines of `lines` within the bounds: at most 20, each clipped to 500 characters, 4096 in all. */
export const boundTail = (lines: ReadonlyArray<string>): ReadonlyArray<string> => {
  const kept: Array<string> = []
  let total = 0
  for (let i = lines.length - 1; i >= 0 && kept.length < bounds.lines; i--) {
    const line = clip(lines[i]!)
    if (total + line.length > bounds.totalChars) break
    total += line.length
    kept.push(line)
  }
  return kept.reverse()
}

/** Where `tail` ends within `lines` (the index after it), or -1 when `lines` does not hold it. */
const endOf = (lines: ReadonlyArray<string>, tail: ReadonlyArray<string>): number => {
  for (let end = lines.length; end >= tail.length; end--) {
    let matches = true
    for (let k = 0; k < tail.length && matches; k++) matches = lines[end - tail.length + k] === tail[k]
    if (matches) return end
  }
  return -1
}

/**
 * The tail after `incoming`: a provider that sends its whole log each time (it holds our tail)
 * gives its own last lines; one that sends only new lines has them appended.
 */
export const mergeLogs = (tail: ReadonlyArray<string>, incoming: ReadonlyArray<string>): ReadonlyArray<string> => {
  const clipped = incoming.map(clip)
  if (tail.length === 0) return boundTail(clipped)
  const end = endOf(clipped, tail)
  return boundTail(end >= 0 ? clipped : [...tail, ...clipped])
}

const finite = (value: number | undefined, low: number, high: number): number | null =>
  value === undefined || !Number.isFinite(value) ? null : Math.min(high, Math.max(low, value))

/**
 * The task's progress after an upstream's report at `now`: `queued` while it names a queue
 * position, `running` otherwise. Undefined when nothing is to be written: the report adds
 * nothing, or the last change is under `throttleMillis` old and the stage is the same (a
 * change of stage is never held back). The caller folds the answer into the write it makes
 * anyway (the reschedule after a poll), never a write of its own.
 */
export const fromUpstream = (
  current: TaskProgress | null,
  report: UpstreamProgress | undefined,
  now: number
): TaskProgress | undefined => {
  if (report === undefined) return undefined
  const queuePosition = finite(report.queuePosition, 0, Number.MAX_SAFE_INTEGER)
  const stage: ProgressStage = queuePosition !== null ? "queued" : "running"
  const next: TaskProgress = {
    stage,
    queuePosition,
    percent: stage === "queued" ? null : finite(report.percent, 0, 100),
    logsTail: report.logs === undefined ? current?.logsTail ?? [] : mergeLogs(current?.logsTail ?? [], report.logs),
    updatedAt: now
  }
  if (current === null) return next
  if (same(current, next)) return undefined
  if (current.stage === next.stage && now - current.updatedAt < throttleMillis) return undefined
  return next
}

/** The result-copy step began: the upstream's job is done, its files are being copied. */
export const finishing = (current: TaskProgress | null, now: number): TaskProgress => ({
  stage: "finishing",
  queuePosition: null,
  percent: null,
  logsTail: current?.logsTail ?? [],
  updatedAt: now
})

/** Whether two progress values say the same (their times aside). */
export const same = (a: TaskProgress | null, b: TaskProgress | null): boolean =>
  a === b || (a !== null && b !== null && a.stage === b.stage && a.queuePosition === b.queuePosition && a.percent === b.percent &&
    a.logsTail.length === b.logsTail.length && a.logsTail.every((line, i) => line === b.logsTail[i]))
