/**
 * Several nodes on one PostgreSQL database wake each other with LISTEN/NOTIFY (PgNotify).
 * Node B is the standard composition (`Mediagate.services`) with its engine's and
 * deliverer's periodic scans set to an hour, so only a wake-up makes it act in time; node
 * A is an API node (submit and cancel, no engine, no deliverer) whose wake-ups reach the
 * others through the relay. The time limits below are bounds on a wait, never sleeps.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { Task } from "@mediagate/core"
import {
  Deadlines,
  IdempotencyKeys,
  Ids,
  Ledger,
  ModelCatalog,
  Outbound,
  SubmitPolicy,
  TaskChanges,
  TaskEvents,
  TaskService,
  TaskServiceAlone,
  TaskWrites,
  Upstream
} from "@mediagate/core"
import { MemoryMediaStore } from "@mediagate/store-memory"
import { Mediagate } from "@mediagate/server"
import { Database, PgNotify, SqlAccounts, SqlLedger, SqlTaskStore } from "@mediagate/store-sql"
import { freshDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import { SimulatedModeration } from "@mediagate/upstream"
import { Context, Effect, Layer, Option, Queue, Redacted } from "effect"
import pg from "pg"

const skip = pgSkipReason("pg-notify")
let database: Awaited<ReturnType<typeof freshDatabase>> | undefined
beforeAll(async () => {
  if (pgUrl !== undefined) database = await freshDatabase(pgUrl)
})
afterAll(async () => {
  await database?.drop()
})

let counter = 0
/** Each test has tables (and so channels) of its own. */
const uniquePrefix = () => `n${process.pid}_${++counter}_`

const account = { id: Ids.AccountId.make("acct_nodes"), name: "nodes" }
const hookUrl = "http://127.0.0.1:9/hook"

/** What node B's upstream and outbound saw. */
interface Seen {
  readonly submits: Queue.Queue<string>
  readonly callbacks: Queue.Queue<Task.Task>
}

/** An upstream that finishes at once, or never when the prompt says "hang". */
const upstream = (seen: Seen) =>
  Layer.succeed(Upstream.Upstream, {
    submit: (job, { taskId }) =>
      Queue.offer(seen.submits, taskId).pipe(
        Effect.zipRight(
          job.prompt.includes("hang")
            ? Effect.never
            : Effect.succeed({ _tag: "Completed" as const, result: { type: "image" as const, urls: ["https://cdn.example/a.png"] } })
        )
      ),
    poll: () => Effect.succeed({ _tag: "Running" as const })
  })

/** An outbound that answers 204 and keeps each callback's task. */
const outbound = (seen: Seen) =>
  Layer.succeed(Outbound.Outbound, {
    post: (request) =>
      Queue.offer(seen.callbacks, JSON.parse(String(request.body)).data as Task.Task).pipe(Effect.as({ status: 204 }))
  })

const client = () => Database.layerPg(Redacted.make(database!.url))
const relay = (tablePrefix: string) => PgNotify.make({ url: Redacted.make(database!.url), tablePrefix })

/** Node B: the standard composition, scans an hour apart. */
const nodeB = (tablePrefix: string, seen: Seen) =>
  Mediagate.services({
    engine: { pollInterval: "1 hour" },
    deliverer: { pollInterval: "1 hour" },
    allowPrivateUrls: true,
    relay: relay(tablePrefix)
  }).pipe(
    Layer.provide(Layer.mergeAll(
      SqlTaskStore.layerWith({ tablePrefix }),
      SqlAccounts.layerWith({ tablePrefix }),
      SqlLedger.layerWith({ tablePrefix }),
      MemoryMediaStore.layer({ baseUrl: "http://127.0.0.1:9/media/" }),
      upstream(seen),
      SimulatedModeration.layer,
      outbound(seen)
    ).pipe(Layer.provide([client(), Ids.layer])))
  )

/** Node A: submit and cancel only; its wake-ups reach the other nodes when `relayed`. */
const nodeA = (tablePrefix: string, relayed: boolean) => {
  const wakeups = Layer.scopedContext(
    Effect.gen(function*() {
      const notify = yield* relay(tablePrefix)
      const tasks = yield* notify.relay("tasks", Effect.void)
      const callbacks = yield* notify.relay("callbacks", Effect.void)
      return Context.make(TaskEvents.TaskWakeup, { wake: tasks }).pipe(Context.add(TaskEvents.CallbackWakeup, { wake: callbacks }))
    })
  )
  const service = TaskService.Default.pipe(
    Layer.provide(TaskWrites.layer),
    Layer.provide([TaskChanges.layer, Ledger.layerUnbilled, IdempotencyKeys.layerMemory, TaskServiceAlone.noUpstream]),
    Layer.provide(Layer.mergeAll(
      SqlTaskStore.layerWith({ tablePrefix }).pipe(Layer.provide(client())),
      Ids.layer,
      ModelCatalog.layer,
      SimulatedModeration.layer,
      Layer.succeed(Deadlines, new Map())
    ))
  )
  return service.pipe(Layer.provide(relayed ? wakeups : Layer.merge(TaskEvents.TaskWakeup.layerNone, TaskEvents.CallbackWakeup.layerNone)))
}

const submit = (prompt: string) =>
  Effect.flatMap(TaskService, (tasks) =>
    tasks.submit(account, { model: "alpha-image-2/text-to-image", input: { prompt }, callBackUrl: hookUrl })
  ).pipe(Effect.provideService(SubmitPolicy, { allowPrivateUrls: true }))

/** Builds both nodes (B first: it listens before A submits) and runs `body` with A's services. */
const twoNodes = <A, E>(relayed: boolean, body: (seen: Seen) => Effect.Effect<A, E, TaskService>) =>
  Effect.scoped(
    Effect.gen(function*() {
      const prefix = uniquePrefix()
      const seen: Seen = { submits: yield* Queue.unbounded<string>(), callbacks: yield* Queue.unbounded<Task.Task>() }
      yield* Layer.build(nodeB(prefix, seen))
      const a = yield* Layer.build(nodeA(prefix, relayed))
      return yield* body(seen).pipe(Effect.provide(a))
    })
  )

describe("PgNotify: nodes on one PostgreSQL database wake each other", () => {
  it.live.skipIf(pgUrl === undefined)(`a submit on node A wakes node B's engine at once${skip}`, () =>
    twoNodes(true, (seen) =>
      Effect.gen(function*() {
        const { taskId } = yield* submit("a lighthouse")
        const started = yield* Queue.take(seen.submits).pipe(Effect.timeout("10 seconds"))
        expect(started).toBe(taskId)
        // B finished it and its own deliverer (woken in-process) sent the callback.
        const callback = yield* Queue.take(seen.callbacks).pipe(Effect.timeout("10 seconds"))
        expect(callback).toMatchObject({ taskId, status: "SUCCESS" })
      })), 30_000)

  it.live.skipIf(pgUrl === undefined)(`a callback owed on node A wakes node B's deliverer at once${skip}`, () =>
    twoNodes(true, (seen) =>
      Effect.gen(function*() {
        // B's engine takes the task and its upstream call hangs; A cancels it: a callback is owed.
        const { taskId } = yield* submit("hang")
        expect(yield* Queue.take(seen.submits).pipe(Effect.timeout("10 seconds"))).toBe(taskId)
        const tasks = yield* TaskService
        yield* tasks.cancel(account, taskId)
        const callback = yield* Queue.take(seen.callbacks).pipe(Effect.timeout("10 seconds"))
        expect(callback).toMatchObject({ taskId, status: "CANCELLED" })
      })), 30_000)

  it.live.skipIf(pgUrl === undefined)(`without the relay on node A, node B waits for its scan${skip}`, () =>
    twoNodes(false, (seen) =>
      Effect.gen(function*() {
        // The control of the first test: the same submit, unheard, is not started within 1.5 s.
        yield* submit("a lighthouse")
        expect(Option.isNone(yield* Queue.take(seen.submits).pipe(Effect.timeoutOption("1500 millis")))).toBe(true)
      })), 30_000)

  it.live.skipIf(pgUrl === undefined)(`a node whose connection was cut listens again and looks for what it missed${skip}`, () =>
    twoNodes(true, (seen) =>
      Effect.gen(function*() {
        // Both nodes' relay connections are cut; A's NOTIFY is lost, and B hears of the
        // submit only by looking once it listens again (its scan is an hour away).
        const cut = yield* Effect.promise(async () => {
          const admin = new pg.Client({ connectionString: database!.url })
          await admin.connect()
          const answer = await admin.query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1",
            [PgNotify.applicationName]
          )
          await admin.end()
          return answer.rowCount
        })
        expect(cut).toBe(2)
        const { taskId } = yield* submit("a lighthouse")
        expect(yield* Queue.take(seen.submits).pipe(Effect.timeout("10 seconds"))).toBe(taskId)
      })), 30_000)

  it.live(`a relay that cannot connect does not stop its node; it says it is not listening`, () =>
    Effect.scoped(
      Effect.gen(function*() {
        // Port 9 (discard) on loopback refuses connections.
        const notify = yield* PgNotify.make({ url: Redacted.make("postgres://nobody@127.0.0.1:9/none"), reconnectDelay: "1 hour" })
        expect(yield* notify.listening).toBe(false)
        const wake = yield* notify.relay("tasks", Effect.void)
        yield* wake
      })
    ), 30_000)
})
