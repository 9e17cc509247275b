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

/**
 * A TaskStore over Maps. Every method is atomic: JavaScript runs it without interleaving.
 * Claims read indexes, not every task: work in flight from a heap by the time it may be
 * claimed, running counts kept per owner as tasks change, and the waiting tasks apart.
 */
export const make: Effect.Effect<Context.Tag.Service<TaskStore.TaskStore>> = Effect.sync(() => {
  const tasks = new Map<string, Task.TaskRecord>()
  /** Tasks waiting to start (PENDING, not yet terminal). */
  const pending = new Map<string, Task.TaskRecord>()
  /** Tasks in flight (past PENDING, not yet terminal), by owner: they count as running. */
  const inFlight = new Map<string, number>()
  let inFlightTotal = 0
  /** Every task in flight has an entry for its current version; older entries are skipped when met. */
  const heap = new Heap(before)
  const entryOf = (task: Task.TaskRecord): Entry => ({
    id: task.id,
    version: task.version,
    at: Math.max(task.dueAt!, task.leaseUntil ?? Number.NEGATIVE_INFINITY),
    due: task.dueAt!
  })
  const isInFlight = (task: Task.TaskRecord | undefined) => task !== undefined && task.dueAt !== null && task.status !== "PENDING"
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
  const put = (task: Task.TaskRecord) => {
    const previous = tasks.get(task.id)
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
    if (task.dueAt !== null && task.status === "PENDING") pending.set(task.id, task)
    else pending.delete(task.id)
  }
  const outbox = new Map<string, TaskStore.CallbackRow>()
  const delivery = new Map<string, { attempts: number; nextAttemptAt: number; leaseUntil: number | null; done: boolean }>()
  const attempts = new Map<string, Array<TaskStore.CallbackAttempt>>()
  /** Callbacks not yet delivered or given up: a claim reads only these, not every callback ever owed. */
  const owed = new Set<string>()
  const duplicate = (callbacks: ReadonlyArray<TaskStore.CallbackRow>) =>
    callbacks.find((row, i) => outbox.has(row.id) || callbacks.findIndex((other) => other.id === row.id) !== i)
  const record = (callbacks: ReadonlyArray<TaskStore.CallbackRow>) =>
    callbacks.forEach((row) => {
      outbox.set(row.id, row)
      delivery.set(row.id, { attempts: 0, nextAttemptAt: row.createdAt, leaseUntil: null, done: false })
      owed.add(row.id)
    })
  const recordAttempt = (attempt: TaskStore.CallbackAttempt) => {
    const state = delivery.get(attempt.callbackId)
    if (state === undefined) return
    attempts.set(attempt.callbackId, [...(attempts.get(attempt.callbackId) ?? []), attempt])
    state.attempts = attempt.attempt
    state.leaseUntil = null
    if (attempt.outcome._tag === "Retry") state.nextAttemptAt = attempt.outcome.retryAt
    else {
      state.done = true
      owed.delete(attempt.callbackId)
    }
  }
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
        const free = (task: Task.TaskRecord) => task.leaseUntil === null || task.leaseUntil <= now
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
        // Then new work within the limits, the owners in turn. Running: in flight, or claimed out of PENDING.
        const busy = new Map(inFlight)
        const onProvider = new Map(inFlightByProvider)
        let running = inFlightTotal
        const waiting: Array<Task.TaskRecord> = []
        for (const task of pending.values()) {
          if (!free(task)) {
            add(busy, task.ownerId, 1)
            if (task.provider !== null) add(onProvider, task.provider, 1)
            running++
          } else if (task.dueAt! <= now) {
            waiting.push(task)
          }
        }
        let room = Math.min(limit - claimed.length, (limits?.running ?? Infinity) - running)
        if (room <= 0 || waiting.length === 0) return claimed
        /** Whether a provider has room for one more task. */
        const roomOn = (provider: string | null) =>
          provider === null || limits?.perProvider === undefined || (onProvider.get(provider) ?? 0) < limits.perProvider(provider)
        const rank = new Map<string, number>()
        const lines = waiting
          .filter((task) => roomOn(task.provider))
          .sort(byDue)
          .map((task) => {
            // The owner's running tasks come first in its line: an owner with fewer running goes first.
            const turn = (rank.get(task.ownerId) ?? busy.get(task.ownerId) ?? 0) + 1
            rank.set(task.ownerId, turn)
            return { task, turn }
          })
          .filter(({ turn }) => turn <= (limits?.perAccount ?? Infinity))
          .sort((a, b) => a.turn - b.turn || byDue(a.task, b.task))
        for (const { task } of lines) {
          if (room <= 0) break
          // A provider may fill up during this claim.
          if (!roomOn(task.provider)) continue
          if (task.provider !== null) add(onProvider, task.provider, 1)
          room--
          claimed.push(lease(task))
        }
        return claimed
      }),
    releaseLeases: (worker) =>
      Effect.sync(() => {
        for (const task of [...tasks.values()]) {
          if (task.dueAt !== null && task.leaseOwner === worker) {
            put(new Task.TaskRecord({ ...task, leaseOwner: null, leaseUntil: null, version: task.version + 1 }, true))
          }
        }
      }),
    list: (ownerId, { cursor, limit }) =>
      Effect.sync(() => {
        // Ids are UUIDv7, so id order is creation order.
        const owned = [...tasks.values()]
          .filter((task) => task.ownerId === ownerId && (cursor === undefined || task.id < cursor))
          .sort((a, b) => (a.id < b.id ? 1 : -1))
        const page = owned.slice(0, limit)
        return { tasks: page, nextCursor: owned.length > limit ? page[page.length - 1]!.id : null }
      }),
    callbacks: (taskId) =>
      Effect.sync(() => [...outbox.values()].filter((row) => row.taskId === taskId)),
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
          return { ...outbox.get(id)!, attempts: state.attempts }
        })
      }),
    recordCallbackAttempt: (attempt) => Effect.sync(() => recordAttempt(attempt)),
    recordCallbackAttempts: (attempts) => Effect.sync(() => attempts.forEach(recordAttempt)),
    callbackAttempts: (callbackId) => Effect.sync(() => attempts.get(callbackId) ?? [])
  }
})

/** The memory TaskStore layer. */
export const layer: Layer.Layer<TaskStore.TaskStore> = Layer.effect(TaskStore.TaskStore, make)
