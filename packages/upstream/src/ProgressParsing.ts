/**
 * Progress as the providers report it, in the shape every adapter answers
 * (`Upstream.UpstreamProgress`): a queue position, log lines, and a percent only where a
 * log line states one.
 *
 * The percent comes from progress-bar lines only, the kind tqdm (and libraries copying it)
 * prints while a model samples: `45%|████▌     | 9/20 [00:02<00:02, 4.1it/s]`, with an
 * optional label before it (`Sampling:  45%|...`). That is the same rule as Replicate's
 * official client (`parseProgressFromLogs`: a percent, a bar between `|`, then `n/total`),
 * widened only by the label and by reading `\r`-separated redraws as lines. A bare `45%` or
 * `step 9/20` in free text is not progress here: a log line also says `VRAM 45%`,
 * `guidance 7.5`, `loaded 3/4 shards` or `100% of the prompt kept`, and a wrong percent is
 * worse than none. A bar's percent must agree with its `n/total` (within one point: tqdm
 * rounds it) or the line is not taken. The last bar line wins: a model with several
 * stages restarts its bar, and the latest is what the provider says now.
 */
import type { Upstream } from "@mediagate/core"

/** The most log lines an adapter passes on: the last ones. */
export const maxLines = 20
/** The most characters of one log line an adapter passes on. */
export const maxLineLength = 500

/** `[label: ]NN%|bar| n/total` at the start of a line, as tqdm draws it. */
const bar = /^\s*(?:[^|%\n]{0,80}?:\s*)?(\d{1,3})%\s*\|[^|]*\|\s*(\d+)\/(\d+)(?!\d)/

/** The percent a progress-bar line states (0 to 100), when it is one and agrees with its `n/total`. */
export const percentOfLine = (line: string): number | undefined => {
  const match = bar.exec(line)
  if (match === null) return undefined
  const percent = Number(match[1])
  const done = Number(match[2])
  const total = Number(match[3])
  if (percent > 100 || total === 0 || done > total) return undefined
  return Math.abs(done / total * 100 - percent) <= 1 ? percent : undefined
}

/** A log text as lines: split at `\n`, and at `\r` where a progress bar redraws itself; blank lines dropped. */
export const linesOf = (text: string): ReadonlyArray<string> => text.split(/\r\n|\r|\n/).filter((line) => line.trim() !== "")

/** The percent of the last progress-bar line among `lines`. */
export const percentOf = (lines: ReadonlyArray<string>): number | undefined => {
  for (let i = lines.length - 1; i >= 0; i--) {
    const percent = percentOfLine(lines[i]!)
    if (percent !== undefined) return percent
  }
  return undefined
}

/** The last `maxLines` lines, each cut to `maxLineLength` characters. */
export const bounded = (lines: ReadonlyArray<string>): ReadonlyArray<string> =>
  lines.slice(-maxLines).map((line) => (line.length > maxLineLength ? line.slice(0, maxLineLength) : line))

/** Progress of the fields given; undefined when none is (an empty log is none). */
export const of = (fields: {
  readonly queuePosition?: number | undefined
  readonly percent?: number | undefined
  readonly logs?: ReadonlyArray<string> | undefined
}): Upstream.UpstreamProgress | undefined => {
  const progress: Upstream.UpstreamProgress = {
    ...(fields.queuePosition === undefined ? {} : { queuePosition: fields.queuePosition }),
    ...(fields.percent === undefined ? {} : { percent: fields.percent }),
    ...(fields.logs === undefined || fields.logs.length === 0 ? {} : { logs: bounded(fields.logs) })
  }
  return Object.keys(progress).length === 0 ? undefined : progress
}

/**
 * The progress a provider reported, from its queue position and its log lines (all of them:
 * the percent is read over every line, the lines passed on are bounded); undefined when it
 * said nothing.
 */
export const fromLogs = (queuePosition: number | undefined, lines: ReadonlyArray<string>): Upstream.UpstreamProgress | undefined =>
  of({ queuePosition, percent: percentOf(lines), logs: lines })

/** A queue position as a provider gives it: a whole number from 0, else not known. */
export const position = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : undefined

/** A percent as a gateway gives it: a number from 0 to 100, else not known. */
export const percent = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isFinite(value) && value >= 0 && value <= 100 ? value : undefined

/** A Running poll outcome, with the progress when there is some. */
export const running = (progress: Upstream.UpstreamProgress | undefined): Upstream.PollOutcome =>
  progress === undefined ? { _tag: "Running" } : { _tag: "Running", progress }
