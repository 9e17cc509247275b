/**
 * TaskStore in memory: for tests, demos and single-process embedding without persistence.
 */
import { Heap, Task, TaskConflict, TaskStore } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer, Option } from "effect"

/** A place in the in-flight index: the task as it was when indexed, and when it may be claimed. */
interface Entry {
  readonly id: string
  readonly version: number
  /** Its due time or, if later, the end of its lease. */
  readonly at: number
  readonly due: number
}

const before = (a: Entry, b: Entry) => a.at < b.at || (a.at === b.at && (a.due < b.due || (a.due === b.due && a.id < b.id)))

/** A place in an owner's line of waiting tasks (PENDING, free): first due first. */
interface Place {
  readonly id: string
  readonly version: number
  readonly due: number
}

const inLine = (a: Place, b: Place) => a.due < b.due || (a.due === b.due && a.id < b.id)

/** A PENDING task under a lease: it runs (counts against the limits) until the lease ends. */
interface Lease {
  readonly id: string
  readonly version: number
  readonly until: number
}

/** An owner with a task ready at the head of its line, as a claim serves them: lowest place first. */
interface Turn {
  readonly owner: string
  /** The head's place: the owner's running tasks, and those taken in this claim, come first. */
  readonly place: number
  readonly head: Place
}

const beforeTurn = (a: Turn, b: Turn) => a.place < b.place || (a.place === b.place && inLine(a.head, b.head))

/** The page of `list` and `listAll`: the tasks the filter lets through, newest first, after the cursor. */
const pageOf = (
  all: Iterable<Task.TaskRecord>,
  { cursor, filter = {}, limit }: { readonly limit: number; readonly cursor?: string | undefined; readonly filter?: TaskStore.AdminListFilter | undefined }
): TaskStore.TaskPage => {
  const { createdAfter, createdBefore, model, ownerId, provider, statuses } = filter
  const shown = (task: Task.TaskRecord) =>
    (ownerId === undefined || task.ownerId === ownerId) &&
    (cursor === undefined || task.id < cursor) &&
    (statuses === undefined || statuses.includes(task.status)) &&
    (model === undefined || task.input["model"] === model) &&
    (provider === undefined || task.provider === provider) &&
    (createdAfter === undefined || task.createdAt > createdAfter) &&
    (createdBefore === undefined || task.createdAt < createdBefore)
  // Ids are UUIDv7, so id order is creation order.
  const found = [...all].filter(shown).sort((a, b) => (a.id < b.id ? 1 : -1))
  const page = found.slice(0, limit)
  return { tasks: page, nextCursor: found.length > limit ? page[page.length - 1]!.id : null }
}

/**
 * A TaskStore over Maps. Every method is atomic: JavaScript runs it without interleaving.
 * Claims read indexes, not every task: work in flight from a heap by the time it may be
 * claimed; waiting tasks from a line per owner (a heap by due time) and the claimed PENDING
 * ones from a heap by the end of their leases; running counts kept per owner and provider
 * as tasks change. A claim costs the owners waiting and the tasks it takes, not the line's
 * length.
 */
export const make: Effect.Effect<Context.Tag.Service<TaskStore.TaskStore>> = Effect.sync(() => {
  const tasks = new Map<string, Task.TaskRecord>()
  /** Tasks in flight (past PENDING, not yet terminal), by owner: they count as running. */
  const inFlight = new Map<string, number>()
  let inFlightTotal = 0
  /** Each owner's line of free PENDING tasks; entries of older versions are dropped when met. */
  const lines = new Map<string, Heap<Place>>()
  /** PENDING tasks under a lease, by its end; they count as running until then (`leasedBy*`). */
  const leases = new Heap<Lease>((a, b) => a.until < b.until || (a.until === b.until && a.id < b.id))
  const leasedByOwner = new Map<string, number>()
  const leasedByProvider = new Map<string, number>()
  let leasedTotal = 0
  /** Leased PENDING tasks whose lease a claim found ended: no longer counted as running. */
  const lapsed = new Set<string>()
  /** Every task in flight has an entry for its current version; older entries are skipped when met. */
  const heap = new Heap(before)
  const entryOf = (task: Task.TaskRecord): Entry => ({
    id: task.id,
    version: task.version,
    at: Math.max(task.dueAt!, task.leaseUntil ?? Number.NEGATIVE_INFINITY),
    due: task.dueAt!
  })
  const isInFlight = (task: Task.TaskRecord | undefined) => task !== undefined && task.dueAt !== null && task.status !== "PENDING"
  const isWaiting = (task: Task.TaskRecord | undefined) => task !== undefined && task.dueAt !== null && task.status === "PENDING"
  /** A PENDING task a worker claimed, counted as running. */
  const isLeased = (task: Task.TaskRecord | undefined) => isWaiting(task) && task!.leaseUntil !== null && !lapsed.has(task!.id)
  /** Tasks in flight by provider, for the tasks that name one. */
  const inFlightByProvider = new Map<string, number>()
  const add = (counts: Map<string, number>, key: string, by: number) => {
    const n = (counts.get(key) ?? 0) + by
    if (n === 0) counts.delete(key)
    else counts.set(key, n)
  }
  const count = (task: Task.TaskRecord, by: number) => {
    add(inFlight, task.ownerId, by)
    if (task.provider !== null) add(inFlightByProvider, task.provider, by)
    inFlightTotal += by
  }
  const countLease = (task: Task.TaskRecord, by: number) => {
    add(leasedByOwner, task.ownerId, by)
    if (task.provider !== null) add(leasedByProvider, task.provider, by)
    leasedTotal += by
  }
  const line = (owner: string) => {
    let found = lines.get(owner)
    if (found === undefined) lines.set(owner, found = new Heap(inLine))
    return found
  }
  /** Whether a line's entry is the task's current version, still waiting. */
  const current = (entry: Place) => {
    const task = tasks.get(entry.id)
    return task !== undefined && task.version === entry.version && isWaiting(task)
  }
  const put = (task: Task.TaskRecord) => {
    const previous = tasks.get(task.id)
    if (isLeased(previous)) countLease(previous!, -1)
    lapsed.delete(task.id)
    tasks.set(task.id, task)
    if (isInFlight(previous)) count(previous!, -1)
    if (isInFlight(task)) {
      count(task, 1)
      heap.push(entryOf(task))
      // Old entries pile up as tasks change: rebuild the heap once they are most of it.
      if (heap.size > 4 * inFlightTotal + 1024) {
        heap.clear()
        for (const current of tasks.values()) if (isInFlight(current)) heap.push(entryOf(current))
      }
    }
    if (isWaiting(task)) {
      if (task.leaseUntil === null) {
        line(task.ownerId).push({ id: task.id, version: task.version, due: task.dueAt! })
      } else {
        countLease(task, 1)
        leases.push({ id: task.id, version: task.version, until: task.leaseUntil })
      }
    }
  }
  const outbox = new Map<string, TaskStore.CallbackRow>()
  const delivery = new Map<
    string,
    { attempts: number; roundStart: number; nextAttemptAt: number; leaseUntil: number | null; status: TaskStore.CallbackStatus }
  >()
  const attempts = new Map<string, Array<TaskStore.CallbackAttempt>>()
  /** Callbacks not yet delivered or given up: a claim reads only these, not every callback ever owed. */
  const owed = new Set<string>()
  const duplicate = (callbacks: ReadonlyArray<TaskStore.CallbackRow>) =>
    callbacks.find((row, i) => outbox.has(row.id) || callbacks.findIndex((other) => other.id === row.id) !== i)
  const record = (callbacks: ReadonlyArray<TaskStore.CallbackRow>) =>
    callbacks.forEach(({ dueAt, leaseUntil, ...row }) => {
      // The first due time, and a lease from the start (a hand-off to the writer's deliverer),
      // are the delivery's, not part of the row read back.
      outbox.set(row.id, row)
      delivery.set(row.id, { attempts: 0, roundStart: 0, nextAttemptAt: dueAt ?? row.createdAt, leaseUntil: leaseUntil ?? null, status: "pending" })
      owed.add(row.id)
    })
  const recordAttempt = (attempt: TaskStore.CallbackAttempt) => {
    const state = delivery.get(attempt.callbackId)
    if (state === undefined) return
    attempts.set(attempt.callbackId, [...(attempts.get(attempt.callbackId) ?? []), attempt])
    state.attempts = attempt.attempt
    state.leaseUntil = null
    if (attempt.outcome._tag === "Retry") {
      state.status = "pending"
      state.nextAttemptAt = attempt.outcome.retryAt
      owed.add(attempt.callbackId)
    } else {
      state.status = attempt.outcome._tag === "Delivered" ? "delivered" : "failed"
      owed.delete(attempt.callbackId)
    }
  }
  const stateOf = (row: TaskStore.CallbackRow): TaskStore.CallbackState => {
    const state = delivery.get(row.id)!
    return { ...row, attempts: state.attempts, status: state.status, nextAttemptAt: state.status === "pending" ? state.nextAttemptAt : null }
  }
  const callbacksOf = (taskId: string) => [...outbox.values()].filter((row) => row.taskId === taskId)
  return {
    create: (task, callbacks = []) =>
      Effect.suspend(() => {
        // A duplicate id is a bug of the caller (ids are unique by construction), so a defect.
        if (tasks.has(task.id)) return Effect.dieMessage(`task ${task.id} exists`)
        const clash = duplicate(callbacks)
        if (clash) return Effect.dieMessage(`callback ${clash.id} exists`)
        put(task)
        record(callbacks)
        return Effect.void
      }),
    get: (id) => Effect.sync(() => Option.fromNullable(tasks.get(id))),
    getOwned: (id, owner) =>
      Effect.sync(() => Option.filter(Option.fromNullable(tasks.get(id)), (task) => task.ownerId === owner)),
    update: (next, expectedVersion, callbacks = []) =>
      Effect.suspend((): Effect.Effect<void, TaskConflict> => {
        const current = tasks.get(next.id)
        if (current === undefined || current.version !== expectedVersion) {
          return Effect.fail(new TaskConflict({ taskId: next.id, expectedVersion }))
        }
        // All or nothing: check everything before changing anything.
        const clash = duplicate(callbacks)
        if (clash) return Effect.dieMessage(`callback ${clash.id} exists`)
        put(next)
        record(callbacks)
        return Effect.void
      }),
    claimDue: ({ leaseUntil, limit, limits, now, worker }) =>
      Effect.sync(() => {
        const byDue = (a: Task.TaskRecord, b: Task.TaskRecord) => a.dueAt! - b.dueAt! || (a.id < b.id ? -1 : 1)
        const lease = (task: Task.TaskRecord) => {
          const record = new Task.TaskRecord({ ...task, leaseOwner: worker, leaseUntil, version: task.version + 1 }, true)
          put(record)
          return record
        }
        // Work in flight first, earliest due first: every entry that may be claimed now.
        const ready = new Map<string, Task.TaskRecord>()
        while (heap.size > 0 && heap.peek()!.at <= now) {
          const entry = heap.pop()!
          const task = tasks.get(entry.id)
          if (task !== undefined && task.version === entry.version && isInFlight(task)) ready.set(task.id, task)
        }
        const due = [...ready.values()].sort(byDue)
        const claimed = due.slice(0, limit).map(lease)
        for (const task of due.slice(limit)) heap.push(entryOf(task))
        // Leases of PENDING tasks that ended: their tasks wait in line again, in their places.
        while (leases.size > 0 && leases.peek()!.until <= now) {
          const entry = leases.pop()!
          const task = tasks.get(entry.id)
          if (task === undefined || task.version !== entry.version || !isLeased(task)) continue
          countLease(task, -1)
          lapsed.add(task.id)
          line(task.ownerId).push({ id: task.id, version: task.version, due: task.dueAt! })
        }
        // Then new work within the limits, the owners in turn. Running: in flight, or claimed out of PENDING.
        let room = Math.min(limit - claimed.length, (limits?.running ?? Infinity) - inFlightTotal - leasedTotal)
        if (room <= 0) return claimed
        const cap = limits?.perAccount ?? Infinity
        const named = (provider: string) => (inFlightByProvider.get(provider) ?? 0) + (leasedByProvider.get(provider) ?? 0)
        const within = limits?.within ?? {}
        /** The targets with limits of their own that also count against a provider's. */
        const under = new Map<string, Array<string>>()
        for (const [target, provider] of Object.entries(within)) under.set(provider, [...(under.get(provider) ?? []), target])
        const onProvider = (provider: string) => (under.get(provider) ?? []).reduce((n, target) => n + named(target), named(provider))
        const perProvider = limits?.perProvider
        const limitOf = (provider: string) =>
          perProvider === undefined ? Infinity : Object.hasOwn(perProvider, provider) ? perProvider[provider]! : perProvider["*"] ?? Infinity
        const hasRoom = (provider: string) => onProvider(provider) < limitOf(provider)
        /** Whether a provider (and the provider a target counts against too) has room for one more task. */
        const roomOn = (provider: string | null) =>
          provider === null || perProvider === undefined || (hasRoom(provider) && (within[provider] === undefined || hasRoom(within[provider])))
        /** The head of an owner's line if it is due, dropping entries of older versions. */
        const head = (owner: string) => {
          const waiting = lines.get(owner)!
          while (waiting.size > 0 && !current(waiting.peek()!)) waiting.pop()
          if (waiting.size === 0) lines.delete(owner)
          const first = waiting.peek()
          return first !== undefined && first.due <= now ? first : undefined
        }
        const running = (owner: string) => (inFlight.get(owner) ?? 0) + (leasedByOwner.get(owner) ?? 0)
        // The lines are served a place at a time: an owner's running tasks come first in its
        // line, so the owner with fewer running goes first. Each lease below counts at once.
        const turns = new Heap<Turn>(beforeTurn)
        for (const owner of [...lines.keys()]) {
          const first = head(owner)
          const busy = running(owner)
          if (first !== undefined && busy < cap) turns.push({ owner, place: busy + 1, head: first })
        }
        /** Tasks of full providers taken off the lines in this claim: back in line after it. */
        const skipped: Array<Place> = []
        while (room > 0 && turns.size > 0) {
          const { owner } = turns.pop()!
          const entry = lines.get(owner)!.pop()!
          const task = tasks.get(entry.id)!
          if (!roomOn(task.provider)) {
            skipped.push(entry)
          } else {
            claimed.push(lease(task))
            room--
          }
          const next = lines.has(owner) ? head(owner) : undefined
          const busy = running(owner)
          if (next !== undefined && busy < cap) turns.push({ owner, place: busy + 1, head: next })
        }
        for (const entry of skipped) line(tasks.get(entry.id)!.ownerId).push(entry)
        return claimed
      }),
    countPending: Effect.sync(() => {
      let count = 0
      for (const task of tasks.values()) if (task.status === "PENDING") count++
      return count
    }),
    releaseLeases: (worker) =>
      Effect.sync(() => {
        for (const task of [...tasks.values()]) {
          if (task.dueAt !== null && task.leaseOwner === worker) {
            put(new Task.TaskRecord({ ...task, leaseOwner: null, leaseUntil: null, version: task.version + 1 }, true))
          }
        }
      }),
    list: (ownerId, { cursor, filter = {}, limit }) => Effect.sync(() => pageOf(tasks.values(), { cursor, filter: { ...filter, ownerId }, limit })),
    listAll: (options) => Effect.sync(() => pageOf(tasks.values(), options)),
    callbacks: (taskId) => Effect.sync(() => callbacksOf(taskId).map(stateOf)),
    redeliverCallbacks: (taskId, now) =>
      Effect.sync(() => {
        // Only the terminal callback: a task's started and progress callbacks are not sent again.
        const rows = callbacksOf(taskId).filter((row) => row.event === undefined || row.event === "completed")
        for (const row of rows) {
          const state = delivery.get(row.id)!
          Object.assign(state, { roundStart: state.attempts, nextAttemptAt: now, status: "pending" })
          owed.add(row.id)
        }
        return rows.length
      }),
    claimCallbacks: ({ leaseUntil, limit, now }) =>
      Effect.sync(() => {
        // The `limit` earliest due, kept in order as the owed callbacks are scanned once.
        const chosen: Array<{ readonly id: string; readonly due: number }> = []
        if (limit <= 0) return []
        for (const id of owed) {
          const state = delivery.get(id)!
          if (state.nextAttemptAt > now || (state.leaseUntil !== null && state.leaseUntil > now)) continue
          if (chosen.length === limit && state.nextAttemptAt >= chosen[limit - 1]!.due) continue
          let at = chosen.length
          while (at > 0 && chosen[at - 1]!.due > state.nextAttemptAt) at--
          chosen.splice(at, 0, { id, due: state.nextAttemptAt })
          if (chosen.length > limit) chosen.pop()
        }
        return chosen.map(({ id }) => {
          const state = delivery.get(id)!
          state.leaseUntil = leaseUntil
          const row = outbox.get(id)!
          return { ...row, attempts: state.attempts, roundStart: state.roundStart, task: tasks.get(row.taskId) ?? null }
        })
      }),
    recordCallbackAttempt: (attempt) => Effect.sync(() => recordAttempt(attempt)),
    recordCallbackAttempts: (attempts) => Effect.sync(() => attempts.forEach(recordAttempt)),
    callbackAttempts: (callbackId) => Effect.sync(() => attempts.get(callbackId) ?? [])
  }
})

/** The memory TaskStore layer. */
export const layer: Layer.Layer<TaskStore.TaskStore> = Layer.effect(TaskStore.TaskStore, make)
