/**
 * Wake-ups between the nodes on one PostgreSQL database, over `LISTEN/NOTIFY`. A submit on
 * one node wakes every engine at once; a callback owed on one node wakes every deliverer;
 * a task whose status changed on one node wakes its waiters (`?wait=`, the events stream)
 * on every node. Each node keeps one connection of its own: it LISTENs on three channels
 * named with the table prefix (`<prefix>tasks`, `<prefix>callbacks`, `<prefix>changes`)
 * and sends its own NOTIFYs on it.
 *
 * A local wake-up runs the local one at once and queues a NOTIFY, sent in the background:
 * the caller (a submit) never waits for the database. NOTIFYs queued while one is being
 * sent are coalesced into one, and a node ignores its own. A change carries task ids: its
 * payload is the node's id and the ids, space-separated; the ids told while a NOTIFY is
 * being sent go together in the next (each once), split into NOTIFYs of less than 8000
 * bytes (PostgreSQL's limit); `*` instead of ids says changes may have been lost. The connection is opened again after an error, with a backoff;
 * since notifications sent meanwhile are lost, a reconnected node wakes its own engine and
 * deliverer once and has its waiters read their tasks again. The periodic scans of the
 * engine and the deliverer, and the waiters' re-reads, stay the safety net.
 */
import { Clock, Deferred, Duration, Effect, Option, Queue, Random, Redacted, Ref } from "effect"
import type { Scope } from "effect"
import type pg from "pg"
import { defaultPrefix } from "./Database.js"

/** What a wake-up is for: the engine's due work, or the deliverer's owed callbacks. */
export type Topic = "tasks" | "callbacks"

/** A channel's name under the table prefix: a wake-up's topic, or `changes` for task changes. */
export type Channel = Topic | "changes"

/** What this node does with the other nodes' task changes (`TaskChanges.Relay` in `@mediagate/core`). */
export interface ChangesListener {
  /** The ids of tasks another node changed. */
  readonly heard: (taskIds: ReadonlyArray<string>) => Effect.Effect<void>
  /** Changes may have been lost (the connection was opened again, or too many were told at once). */
  readonly missed: Effect.Effect<void>
}

/** Settings of the relay. */
export interface Options {
  /** The PostgreSQL database (the task store's). */
  readonly url: Redacted.Redacted<string>
  /** The task store's table prefix: nodes on different prefixes do not wake each other. Default `mediagate_`. */
  readonly tablePrefix?: string
  /** First wait before opening the connection again after it failed; doubles up to `maxReconnectDelay`. Default 500 ms. */
  readonly reconnectDelay?: Duration.DurationInput
  /** Longest wait between two attempts to open the connection. Default 30 s. */
  readonly maxReconnectDelay?: Duration.DurationInput
}

/** The relay of one node. */
export interface PgNotify {
  /**
   * Wraps a local wake-up of `topic` for the scope's lifetime: the answer runs `local` and
   * tells the other nodes; their wake-ups of `topic` run `local` here.
   */
  readonly relay: (topic: Topic, local: Effect.Effect<void>) => Effect.Effect<Effect.Effect<void>, never, Scope.Scope>
  /**
   * Carries task changes for the scope's lifetime: the answer tells the other nodes that
   * the tasks of these ids changed (in the background); theirs run `listener` here.
   */
  readonly changes: (
    listener: ChangesListener
  ) => Effect.Effect<(taskIds: ReadonlyArray<string>) => Effect.Effect<void>, never, Scope.Scope>
  /** Whether the connection is listening now (for health checks and tests). */
  readonly listening: Effect.Effect<boolean>
}

const identifier = /^[A-Za-z_][A-Za-z0-9_]*$/

/** The `application_name` of the relay's connection, as `pg_stat_activity` shows it. */
export const applicationName = "mediagate-notify"

/** The channel of a topic under a table prefix. */
export const channel = (tablePrefix: string, topic: Channel): string => `${tablePrefix}${topic}`

const topics: ReadonlyArray<Topic> = ["tasks", "callbacks"]
const channels: ReadonlyArray<Channel> = [...topics, "changes"]

/** The longest payload of a NOTIFY of changes, in bytes: PostgreSQL takes less than 8000. */
export const maxPayloadBytes = 7900

/**
 * Task ids waiting to be told, or heard and not yet handed on, beyond which they are
 * dropped for one "changes may have been lost" (`*`): a connection that hangs does not
 * hold every id written meanwhile, and a node flooded with ids reads its waited-on tasks once.
 */
const maxPendingIds = 10_000

/** The payloads telling `taskIds` from `node`: its id, then the ids, space-separated, each payload within `maxPayloadBytes`. */
export const changePayloads = (node: string, taskIds: Iterable<string>): Array<string> => {
  const payloads: Array<string> = []
  const empty = Buffer.byteLength(node)
  let payload = node
  let bytes = empty
  for (const taskId of taskIds) {
    const more = Buffer.byteLength(taskId) + 1
    if (bytes + more > maxPayloadBytes && bytes > empty) {
      payloads.push(payload)
      payload = node
      bytes = empty
    }
    payload += ` ${taskId}`
    bytes += more
  }
  if (bytes > empty) payloads.push(payload)
  return payloads
}

/** Where the message of a failed connection comes from, without the URL (it may hold a password). */
const reason = (error: unknown) => (error instanceof Error ? error.message : String(error))

/**
 * The relay, listening for the scope's lifetime. It waits for the first connection (or its
 * failure, which is logged; attempts go on in the background), so once it is built the
 * node hears the others.
 */
export const make = (options: Options): Effect.Effect<PgNotify, never, Scope.Scope> =>
  Effect.gen(function*() {
    const prefix = options.tablePrefix ?? defaultPrefix
    if (!identifier.test(prefix)) return yield* Effect.dieMessage(`table prefix must be letters, digits and _: '${prefix}'`)
    const firstDelay = Duration.toMillis(options.reconnectDelay ?? "500 millis")
    const maxDelay = Duration.toMillis(options.maxReconnectDelay ?? "30 seconds")
    // Tells this node's NOTIFYs from the others' (a session hears its own).
    const node = `${(yield* Clock.currentTimeMillis).toString(36)}-${(yield* Random.nextIntBetween(0, 2 ** 30)).toString(36)}`

    /** The local wake-ups of each topic, and a queue per topic between the listener and them. */
    const locals: Record<Topic, Array<Effect.Effect<void>>> = { tasks: [], callbacks: [] }
    const heard: Record<Topic, Queue.Queue<void>> = {
      tasks: yield* Queue.sliding<void>(1),
      callbacks: yield* Queue.sliding<void>(1)
    }
    const wakeLocals = (topic: Topic) => Effect.forEach(locals[topic], (wake) => wake, { discard: true })
    for (const topic of topics) {
      yield* Queue.take(heard[topic]).pipe(Effect.zipRight(wakeLocals(topic)), Effect.forever, Effect.forkScoped)
    }

    /**
     * The other nodes' task changes, heard and not yet handed on: the ids heard while the
     * listeners are busy go to them together, each once. `heardAll`: changes may have been lost.
     */
    const listeners: Array<ChangesListener> = []
    const heardIds = new Set<string>()
    let heardAll = false
    const heardChanges = yield* Queue.sliding<void>(1)
    const hear = (taskIds: ReadonlyArray<string> | "all") => {
      if (taskIds === "all") heardAll = true
      else for (const taskId of taskIds) heardIds.add(taskId)
      if (heardIds.size > maxPendingIds) heardAll = true
      if (heardAll) heardIds.clear()
      heardChanges.unsafeOffer(undefined)
    }
    const handOn = Effect.suspend(() => {
      const all = heardAll
      const taskIds = [...heardIds]
      heardAll = false
      heardIds.clear()
      return Effect.forEach(listeners, (listener) => (all ? listener.missed : listener.heard(taskIds)), { discard: true })
    })
    yield* Queue.take(heardChanges).pipe(Effect.zipRight(handOn), Effect.forever, Effect.forkScoped)

    const connection = yield* Ref.make(Option.none<pg.Client>())
    const ready = yield* Deferred.make<void>()

    /** One session: connect, LISTEN, wait until the connection breaks (the answer is its error). */
    const session = (reconnected: boolean) =>
      Effect.gen(function*() {
        const client = yield* Effect.acquireRelease(
          Effect.tryPromise({
            try: async () => {
              // pg is imported here, not at the top: a process on SQLite never loads it.
              const { default: { Client } } = await import("pg")
              const client = new Client({
                connectionString: Redacted.value(options.url),
                connectionTimeoutMillis: 10_000,
                application_name: applicationName
              })
              // Errors before `connect` settles reject it; a handler must exist so none is unhandled.
              client.on("error", () => {})
              await client.connect()
              return client
            },
            catch: reason
          }),
          (client) => Effect.promise(() => client.end().catch(() => undefined)).pipe(Effect.timeoutOption("1 second"))
        )
        const broken = yield* Deferred.make<never, string>()
        client.on("error", (error) => Deferred.unsafeDone(broken, Effect.fail(reason(error))))
        client.on("end", () => Deferred.unsafeDone(broken, Effect.fail("the connection ended")))
        client.on("notification", (message) => {
          if (message.payload === node) return
          if (message.channel === channel(prefix, "changes")) {
            const [from, ...taskIds] = (message.payload ?? "").split(" ")
            if (from !== node) hear(taskIds.includes("*") ? "all" : taskIds)
            return
          }
          for (const topic of topics) {
            if (message.channel === channel(prefix, topic)) heard[topic].unsafeOffer(undefined)
          }
        })
        for (const name of channels) {
          yield* Effect.tryPromise({
            try: () => client.query(`LISTEN ${client.escapeIdentifier(channel(prefix, name))}`),
            catch: reason
          })
        }
        yield* Ref.set(connection, Option.some(client))
        yield* Deferred.succeed(ready, undefined)
        // Notifications sent while this node was not listening are lost: look once, now.
        if (reconnected) {
          yield* Effect.forEach(topics, (topic) => heard[topic].offer(undefined), { discard: true })
          hear("all")
        }
        yield* Effect.logDebug("pg-notify: listening")
        return yield* Deferred.await(broken)
      }).pipe(Effect.scoped, Effect.ensuring(Ref.set(connection, Option.none())))

    // Sessions one after another, forever; the wait between them doubles while they fail.
    const sessions = Effect.gen(function*() {
      let delay = firstDelay
      let reconnected = false
      for (;;) {
        const started = yield* Clock.currentTimeMillis
        const ended = yield* Effect.flip(session(reconnected))
        yield* Deferred.succeed(ready, undefined)
        const lasted = (yield* Clock.currentTimeMillis) - started
        // A session that lasted resets the backoff: this is a new failure, not the same one.
        if (lasted > maxDelay) delay = firstDelay
        yield* Effect.logWarning(
          `pg-notify: not listening (${ended}); other nodes' wake-ups wait for the periodic scan; trying again in ${delay} ms`
        )
        yield* Effect.sleep(Duration.millis(delay))
        delay = Math.min(maxDelay, delay * 2)
        reconnected = true
      }
    })
    yield* Effect.forkScoped(sessions)
    yield* Deferred.await(ready)

    /**
     * One query at a time on the connection: the topics' senders would otherwise query it at
     * once, which pg 8 queues with a DeprecationWarning and pg 9 refuses.
     */
    const oneAtATime = yield* Effect.makeSemaphore(1)

    /** Sends one NOTIFY on `name`'s channel, if connected; a failure only costs the other nodes a scan interval. */
    const notify = (name: Channel, payload: string = node) =>
      Effect.flatMap(Ref.get(connection), (client) =>
        Option.match(client, {
          onNone: () => Effect.void,
          onSome: (client) =>
            Effect.tryPromise({
              try: () => client.query("SELECT pg_notify($1, $2)", [channel(prefix, name), payload]),
              catch: reason
            }).pipe(
              oneAtATime.withPermits(1),
              Effect.asVoid,
              Effect.catchAll((error) => Effect.logDebug(`pg-notify: NOTIFY ${name} failed: ${error}`))
            )
        }))

    /** NOTIFYs to send, one pending at most per topic: wake-ups made while one is sent become one. */
    const outbox: Record<Topic, Queue.Queue<void>> = {
      tasks: yield* Queue.sliding<void>(1),
      callbacks: yield* Queue.sliding<void>(1)
    }
    for (const topic of topics) {
      yield* Queue.take(outbox[topic]).pipe(Effect.zipRight(notify(topic)), Effect.forever, Effect.forkScoped)
    }

    /** Task ids to tell, each once, gathered while a NOTIFY of changes is being sent; `toldAll`: too many, tell `*`. */
    const toldIds = new Set<string>()
    let toldAll = false
    const changesOutbox = yield* Queue.sliding<void>(1)
    const sendChanges = Effect.suspend(() => {
      const payloads = toldAll ? [`${node} *`] : changePayloads(node, toldIds)
      toldAll = false
      toldIds.clear()
      return Effect.forEach(payloads, (payload) => notify("changes", payload), { discard: true })
    })
    yield* Queue.take(changesOutbox).pipe(Effect.zipRight(sendChanges), Effect.forever, Effect.forkScoped)
    const tell = (taskIds: ReadonlyArray<string>) =>
      Effect.suspend(() => {
        for (const taskId of taskIds) toldIds.add(taskId)
        if (toldIds.size > maxPendingIds) {
          toldAll = true
          toldIds.clear()
        }
        return changesOutbox.offer(undefined)
      }).pipe(Effect.asVoid)

    const changes = (listener: ChangesListener) =>
      Effect.gen(function*() {
        listeners.push(listener)
        yield* Effect.addFinalizer(() => Effect.sync(() => listeners.splice(listeners.indexOf(listener), 1)))
        return tell
      })

    const relay = (topic: Topic, local: Effect.Effect<void>) =>
      Effect.gen(function*() {
        locals[topic].push(local)
        yield* Effect.addFinalizer(() => Effect.sync(() => locals[topic].splice(locals[topic].indexOf(local), 1)))
        return local.pipe(Effect.zipRight(outbox[topic].offer(undefined)), Effect.asVoid)
      })

    return { relay, changes, listening: Effect.map(Ref.get(connection), Option.isSome) }
  })
