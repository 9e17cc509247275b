/**
 * A provider's webhook: its task is made due at once and the engine woken, so the result is
 * fetched now rather than at the next poll; a task a worker holds is made due once the
 * worker's step has written.
 */
import { Clock, Duration, Effect, Option, Queue } from "effect"
import { TaskId } from "../domain/Ids.js"
import * as Lifecycle from "../domain/Lifecycle.js"
import type { TaskRecord } from "../domain/Task.js"
import { TaskChanges } from "../services/TaskChanges.js"
import { TaskWakeup } from "../services/TaskEvents.js"
import { TaskStore } from "../services/TaskStore.js"
import { type InboundWebhook, Upstream } from "../services/Upstream.js"
import { TaskWrites } from "./TaskWrites.js"
import { traced } from "./SpanOptions.js"

/**
 * A webhook for a task a worker holds waits for the worker's write, for at most `limit` ms (a
 * poll takes longer only when the provider is slow). It is woken by the write when the worker
 * is on this node; `every` ms it reads the task again, the safety net for a worker on another
 * node (whose poll writes are not told between nodes: a write giving the lease up changes
 * nothing a waiter shows, `TaskChanges.shows`, so the relay does not carry it).
 */
export const webhookWatch = { every: 500, limit: 10_000 } as const

/** `receiveWebhook` over the upstream's check, the store, the write path and this node's task changes. */
export const make = Effect.gen(function*() {
  const store = yield* TaskStore
  const wakeup = yield* TaskWakeup
  const upstream = yield* Upstream
  const writes = yield* TaskWrites
  const changes = yield* TaskChanges

  /** Carries out the answer's write, if any; the engine moving the task meanwhile is as good. */
  const carry = (record: TaskRecord, answer: Lifecycle.Answer) =>
    answer.write._tag === "Reschedule"
      ? writes.reschedule(record, answer.write.dueAt, answer.write.patch).pipe(
        Effect.asVoid,
        Effect.catchTags({ TaskConflict: () => Effect.void, IllegalTransition: () => Effect.void })
      )
      : Effect.void

  /**
   * For a task a worker holds (a step in flight, which may have asked the provider before the
   * news came): waits until the step's write gives it up, for at most `webhookWatch.limit`
   * ms, then makes it due now. Otherwise the step's write would put the next poll at the
   * safety net's time (30 s and more) and the news would wait for it: with Replicate's
   * `logs` events, polls are frequent and a `completed` event arriving during one is likely.
   * Woken by this node's writes of the task (subscribed before the task is read, so none is
   * missed); a worker on another node is seen at the re-read every `webhookWatch.every` ms.
   */
  const afterStep = (taskId: TaskId, since: number) =>
    Effect.scoped(Effect.gen(function*() {
      const written = yield* changes.subscribe(taskId)
      for (;;) {
        const now = yield* Clock.currentTimeMillis
        const current = yield* store.get(taskId)
        if (Option.isNone(current)) return
        const answer = Lifecycle.decide(current.value, { _tag: "Webhook" }, now)
        if (answer.then._tag !== "AwaitStep") return yield* carry(current.value, answer)
        const left = since + webhookWatch.limit - now
        if (left <= 0) return
        yield* Effect.raceFirst(Queue.take(written), Effect.sleep(Duration.millis(Math.min(webhookWatch.every, left))))
      }
    }))

  /**
   * A provider's webhook: when the upstream finds it genuine, its task (the token) is due
   * at once and the engine is woken, so the result is fetched now rather than at the next
   * poll; a task being stepped is made due once the step has written (`afterStep`). Answers
   * whether it was accepted; an unknown, finished or not yet submitted task is accepted and
   * left alone (the provider need not send it again). The webhook's body is never read: a
   * webhook that says the job still runs (Replicate's `start`, `output`, `logs`) only
   * brings a poll, whose answer updates the progress (throttled) and never ends the task.
   */
  const receiveWebhook = traced("TaskService.receiveWebhook")(function*(webhook: InboundWebhook) {
    if (upstream.verifyWebhook === undefined || !(yield* upstream.verifyWebhook(webhook))) return false
    const found = yield* store.get(TaskId.make(webhook.token))
    if (Option.isNone(found)) return true
    const now = yield* Clock.currentTimeMillis
    const answer = Lifecycle.decide(found.value, { _tag: "Webhook" }, now)
    if (answer.then._tag === "Done") return true
    yield* answer.then._tag === "AwaitStep" ? afterStep(found.value.id, now) : carry(found.value, answer)
    yield* wakeup.wake
    return true
  })

  return { receiveWebhook } as const
})
