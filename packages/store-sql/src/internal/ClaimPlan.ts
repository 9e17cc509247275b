/**
 * The choice of waiting work in a claim (`ClaimDue`), from what runs: how many of each
 * owner's line to read, which providers are full, and which of the lines' tasks to lease,
 * places served in order across the lines, so owners alternate and the least busy goes
 * first. Pure: the statements around it are ClaimDue's.
 *
 * `make` uses no name from outside itself, not even an import: the SQLite worker runs it
 * from its text, planning a claim where the connection is (`ClaimInWorker`).
 */
import type { TaskStore } from "@mediagate/core"
import type { Row } from "./Rows.js"

/** A waiting task at its place in its owner's line (its owner's running tasks first). */
export interface Place {
  readonly id: string
  readonly place: number
  readonly due: number
  readonly provider: string | null
}

export interface Plan {
  /** The providers with no room (and the targets under them): the lines leave their tasks out. */
  readonly full: ReadonlyArray<string>
  /** How many of an owner's waiting tasks may start: what its line reads. */
  readonly take: (owner: string) => number
  /** An owner's line (rows of `id`, `due_at`, `provider`) as places. */
  readonly places: (owner: string, rows: ReadonlyArray<Row>) => ReadonlyArray<Place>
  /** Narrows the room to at most `most` (the claim's limit less the work in flight it took); the room. */
  readonly narrow: (most: number) => number
  /** The tasks to lease, in order of place, within the room and the providers' limits. */
  readonly choose: (places: ReadonlyArray<Place>) => Array<string>
}

/**
 * The plan for `room` tasks at most, from the running tasks counted by owner and provider
 * (rows of `owner_id`, `provider`, `n`) and the claim's limits.
 */
export const make = (running: ReadonlyArray<Row>, limits: TaskStore.ClaimOptions["limits"], room: number): Plan => {
  const text = (value: unknown) => (value === null || value === undefined ? null : String(value))
  const busy = new Map<string, number>()
  const onProvider = new Map<string, number>()
  for (const row of running) {
    busy.set(String(row["owner_id"]), (busy.get(String(row["owner_id"])) ?? 0) + Number(row["n"]))
    const provider = text(row["provider"])
    if (provider !== null) onProvider.set(provider, (onProvider.get(provider) ?? 0) + Number(row["n"]))
  }
  if (limits !== undefined) {
    room = Math.min(room, limits.running - [...busy.values()].reduce((a, b) => a + b, 0))
  }
  const cap = limits?.perAccount ?? Number.POSITIVE_INFINITY
  const perProvider = limits?.perProvider
  const within = limits?.within ?? {}
  // A target with a limit of its own counts against its provider's too.
  for (const [target, provider] of Object.entries(within)) {
    const n = onProvider.get(target) ?? 0
    if (n > 0) onProvider.set(provider, (onProvider.get(provider) ?? 0) + n)
  }
  const limitOf = (provider: string, limits: Readonly<Record<string, number>>) =>
    Object.hasOwn(limits, provider) ? limits[provider]! : limits["*"] ?? Number.POSITIVE_INFINITY
  const hasRoom = (provider: string, limits: Readonly<Record<string, number>>) => (onProvider.get(provider) ?? 0) < limitOf(provider, limits)
  /** Whether a provider (and the provider a target counts against too) has room for one more task. */
  const roomOn = (provider: string | null) =>
    provider === null || perProvider === undefined ||
    (hasRoom(provider, perProvider) && (within[provider] === undefined || hasRoom(within[provider], perProvider)))
  /** Counts a task started in this claim against its provider (and the one a target counts against too). */
  const countOn = (provider: string) => {
    for (const key of within[provider] === undefined ? [provider] : [provider, within[provider]]) {
      onProvider.set(key, (onProvider.get(key) ?? 0) + 1)
    }
  }
  return {
    // Lines leave out the tasks of full providers, so they do not hide others' behind them;
    // the targets under a full provider are full too, whether or not any of theirs runs.
    full: [...new Set([...onProvider.keys(), ...Object.keys(within)])].filter((provider) => !roomOn(provider)),
    take: (owner) => Math.min(room, cap - (busy.get(owner) ?? 0)),
    places: (owner, rows) => {
      const running = busy.get(owner) ?? 0
      return rows.map((row, i) => ({ id: String(row["id"]), place: running + i + 1, due: Number(row["due_at"]), provider: text(row["provider"]) }))
    },
    narrow: (most) => (room = Math.min(room, most)),
    choose: (places) => {
      const chosen: Array<string> = []
      for (const place of [...places].sort((a, b) => a.place - b.place || a.due - b.due || (a.id < b.id ? -1 : 1))) {
        if (chosen.length >= room) break
        // A provider may fill up during this claim.
        if (!roomOn(place.provider)) continue
        if (place.provider !== null) countOn(place.provider)
        chosen.push(place.id)
      }
      return chosen
    }
  }
}
