/**
 * Usage reports (issue 35): an account's (or every account's) tasks by status, spend and
 * refunds over a window, per UTC day, model or key, with totals. Every figure is a view of
 * the ledger and the tasks (`UsageStore`), folded here, in one place:
 *
 * - tasks: the tasks created in the window, counted by the status they have now;
 * - spend: what the window's charges took out of balances (a SUCCESS task's price), so the
 *   spend of all time is the sum of the charges `credits show` lists, and balance = credits - spend;
 * - refunds: what the window's releases gave back to what may be reserved (the hold of a
 *   task that ended otherwise), which never touched the balance;
 * - credits (totals only, since a credit has no model or key): what the window's credits added;
 * - uploads: the files uploaded in the window (`POST /files`) and their bytes, deleted or not
 *   since, so a window's figures never change; an upload has no model (the null group by model).
 *
 * Money is counted when its entry is written (a charge at the task's end), tasks when they
 * were created: a task created on the 31st that succeeds on the 1st counts on the 31st and
 * spends on the 1st. Uploads count on the day they were created, under the key they were uploaded with.
 */
import { Either } from "effect"
import { TaskStatus } from "../domain/Task.js"
import type { UsageGroupBy, UsageGroupKey, UsageRows } from "../services/UsageStore.js"
import { dayMillis } from "../services/UsageStore.js"

/** The longest window a report covers: a year, leap day included. */
export const maxWindowDays = 366

/** Tasks by status, with their total. */
export type StatusCounts = { readonly total: number } & { readonly [S in TaskStatus]: number }

/** A group's figures. */
export interface UsageFigures {
  readonly tasks: StatusCounts
  /** What charges took out of balances (micro-USD, >= 0). */
  readonly spendMicroUsd: number
  /** How many charges. */
  readonly charges: number
  /** What releases gave back to what may be reserved (micro-USD, >= 0); never part of spend. */
  readonly refundsMicroUsd: number
  /** How many releases. */
  readonly releases: number
  /** How many files were uploaded. */
  readonly uploads: number
  /** Their bytes, as stored. */
  readonly uploadBytes: number
}

export interface UsageGroup extends UsageFigures {
  /** `2026-11-29` for a day, the model id, the key id; null for rows without one. */
  readonly group: string | null
}

export interface UsageReport {
  readonly from: number
  readonly to: number
  readonly groupBy: UsageGroupBy
  readonly groups: ReadonlyArray<UsageGroup>
  readonly totals: UsageFigures & {
    /** What credits added to balances in the window (micro-USD). */
    readonly creditsMicroUsd: number
  }
}

const noTasks = (): { total: number } & Record<TaskStatus, number> => ({
  total: 0,
  ...Object.fromEntries(TaskStatus.literals.map((status) => [status, 0])) as Record<TaskStatus, number>
})

interface Figures {
  tasks: { total: number } & Record<TaskStatus, number>
  spendMicroUsd: number
  charges: number
  refundsMicroUsd: number
  releases: number
  uploads: number
  uploadBytes: number
}

const empty = (): Figures => ({ tasks: noTasks(), spendMicroUsd: 0, charges: 0, refundsMicroUsd: 0, releases: 0, uploads: 0, uploadBytes: 0 })

/** `2026-11-29` for a day's number. */
export const dayLabel = (day: number): string => new Date(day * dayMillis).toISOString().slice(0, 10)

const label = (groupBy: UsageGroupBy, group: UsageGroupKey): string | null =>
  group === null ? null : groupBy === "day" ? dayLabel(Number(group)) : group

/** Nulls last; days, models and keys in their string order (days sort as dates). */
const byGroup = (a: UsageGroup, b: UsageGroup) =>
  a.group === b.group ? 0 : a.group === null ? 1 : b.group === null ? -1 : a.group < b.group ? -1 : 1

/** The report of a store's rows. */
export const report = (query: { readonly from: number; readonly to: number; readonly groupBy: UsageGroupBy }, rows: UsageRows): UsageReport => {
  const groups = new Map<string | null, Figures>()
  const totals = empty()
  let creditsMicroUsd = 0
  const figuresOf = (group: UsageGroupKey) => {
    const key = label(query.groupBy, group)
    const found = groups.get(key)
    if (found !== undefined) return found
    const made = empty()
    groups.set(key, made)
    return made
  }
  for (const row of rows.tasks) {
    for (const figures of [figuresOf(row.group), totals]) {
      figures.tasks[row.status] += row.count
      figures.tasks.total += row.count
    }
  }
  for (const row of rows.ledger) {
    if (row.kind === "credit") {
      creditsMicroUsd += row.amount
      continue
    }
    if (row.kind === "reserve") continue
    for (const figures of [figuresOf(row.group), totals]) {
      if (row.kind === "charge") {
        figures.spendMicroUsd -= row.amount
        figures.charges += row.count
      } else {
        figures.refundsMicroUsd -= row.held
        figures.releases += row.count
      }
    }
  }
  for (const row of rows.uploads) {
    for (const figures of [figuresOf(row.group), totals]) {
      figures.uploads += row.count
      figures.uploadBytes += row.bytes
    }
  }
  return {
    from: query.from,
    to: query.to,
    groupBy: query.groupBy,
    groups: [...groups.entries()].map(([group, figures]) => ({ group, ...figures })).sort(byGroup),
    totals: { ...totals, creditsMicroUsd }
  }
}

/** The start of the UTC month of `at`. */
export const monthStart = (at: number): number => {
  const date = new Date(at)
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1)
}

/** The start of the UTC month after the one of `at`. */
export const nextMonthStart = (at: number): number => {
  const date = new Date(at)
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1)
}

const isDate = (value: string) => /^\d{4}-\d{2}-\d{2}$/.test(value)

/**
 * A report's window from the request's `from` and `to`, each a date (`2026-11-01`) or a time
 * with a time zone, read by `parse` (epoch milliseconds, or undefined when it is neither):
 * `from` is included, `to` excluded, except that a date as `to` includes that day. Without
 * either: the current UTC month; without `from`: from the first of `to`'s month; without
 * `to`: to the end of the current UTC month. At most `maxWindowDays` days; the message of a
 * broken rule names it.
 */
export const window = (
  given: { readonly from?: string | undefined; readonly to?: string | undefined },
  now: number,
  parse: (value: string) => number | undefined
): Either.Either<{ readonly from: number; readonly to: number }, string> => {
  const read = (name: string, value: string | undefined) => {
    if (value === undefined) return Either.right(undefined)
    const at = parse(value)
    return at === undefined
      ? Either.left(`${name} must be an ISO 8601 date (2026-11-01) or time with a time zone (2026-11-01T12:00:00Z)`)
      : Either.right(name === "to" && isDate(value) ? at + dayMillis : at)
  }
  return Either.gen(function*() {
    const givenFrom = yield* read("from", given.from)
    const givenTo = yield* read("to", given.to)
    const to = givenTo ?? nextMonthStart(now)
    const from = givenFrom ?? monthStart(to - 1)
    if (from >= to) return yield* Either.left("from must be before to")
    if (to - from > maxWindowDays * dayMillis) return yield* Either.left(`from and to must be at most ${maxWindowDays} days apart`)
    return { from, to }
  })
}

/** The columns of a report as CSV, in order. */
export const csvColumns = [
  "group",
  "tasks_total",
  ...TaskStatus.literals.map((status) => `tasks_${status.toLowerCase()}`),
  "spend_micro_usd",
  "charges",
  "refunds_micro_usd",
  "releases",
  "uploads",
  "upload_bytes",
  "credits_micro_usd"
] as const

/** A CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180), and never read as a formula by a spreadsheet. */
const field = (value: string) => {
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, "\"\"")}"` : safe
}

const figuresRow = (figures: UsageFigures) => [
  String(figures.tasks.total),
  ...TaskStatus.literals.map((status) => String(figures.tasks[status])),
  String(figures.spendMicroUsd),
  String(figures.charges),
  String(figures.refundsMicroUsd),
  String(figures.releases),
  String(figures.uploads),
  String(figures.uploadBytes)
]

/**
 * The report as CSV (RFC 4180, CRLF line ends): a header row (`csvColumns`), a row per group
 * (`group` the day, model or key, empty for none; `credits_micro_usd` empty, credits having
 * no group), then a row whose `group` is `total`.
 */
export const csv = (report: UsageReport): string =>
  [
    csvColumns.join(","),
    ...report.groups.map((group) => [field(group.group ?? ""), ...figuresRow(group), ""].join(",")),
    ["total", ...figuresRow(report.totals), String(report.totals.creditsMicroUsd)].join(",")
  ].join("\r\n") + "\r\n"
