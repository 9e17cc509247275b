/**
 * Wake-ups between the nodes on one PostgreSQL database, over `LISTEN/NOTIFY`. A submit on
 * one node wakes every engine at once; a callback owed on one node wakes every deliverer.
 * Each node keeps one connection of its own: it LISTENs on two channels named with the
 * table prefix (`<prefix>tasks`, `<prefix>callbacks`) and sends its own NOTIFYs on it.
 *
 * A local wake-up runs the local one at once and queues a NOTIFY, sent in the background:
 * the caller (a submit) never waits for the database. NOTIFYs queued while one is being
 * sent are coalesced into one, and a node ignores its own. The connection is opened again
 * after an error, with a backoff; since notifications sent meanwhile are lost, a
 * reconnected node wakes its own engine and deliverer once. The periodic scans of the
 * engine and the deliverer stay the safety net for anything missed.
 */
import { Clock, Deferred, Duration, Effect, Option, Queue, Random, Redacted, Ref } from "effect"
import type { Scope } from "effect"
import pg from "pg"
import { defaultPrefix } from "./Database.js"

/** What a wake-up is for: the engine's due work, or the deliverer's owed callbacks. */
export type Topic = "tasks" | "callbacks"

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
  /** Whether the connection is listening now (for health checks and tests). */
  readonly listening: Effect.Effect<boolean>
}

const identifier = /^[A-Za-z_][A-Za-z0-9_]*$/

/** The `application_name` of the relay's connection, as `pg_stat_activity` shows it. */
export const applicationName = "mediagate-notify"

/** The channel of a topic under a table prefix. */
export const channel = (tablePrefix: string, topic: Topic): string => `${tablePrefix}${topic}`

const topics: ReadonlyArray<Topic> = ["tasks", "callbacks"]

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

    const connection = yield* Ref.make(Option.none<pg.Client>())
    const ready = yield* Deferred.make<void>()

    /** One session: connect, LISTEN, wait until the connection breaks (the answer is its error). */
    const session = (reconnected: boolean) =>
      Effect.gen(function*() {
        const client = yield* Effect.acquireRelease(
          Effect.tryPromise({
            try: async () => {
              const client = new pg.Client({
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
          for (const topic of topics) {
            if (message.channel === channel(prefix, topic)) heard[topic].unsafeOffer(undefined)
          }
        })
        for (const topic of topics) {
          yield* Effect.tryPromise({
            try: () => client.query(`LISTEN ${client.escapeIdentifier(channel(prefix, topic))}`),
            catch: reason
          })
        }
        yield* Ref.set(connection, Option.some(client))
        yield* Deferred.succeed(ready, undefined)
        // Notifications sent while this node was not listening are lost: look once, now.
        if (reconnected) yield* Effect.forEach(topics, (topic) => heard[topic].offer(undefined), { discard: true })
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

    /** Sends one NOTIFY of `topic`, if connected; a failure only costs the other nodes a scan interval. */
    const notify = (topic: Topic) =>
      Effect.flatMap(Ref.get(connection), (client) =>
        Option.match(client, {
          onNone: () => Effect.void,
          onSome: (client) =>
            Effect.tryPromise({
              try: () => client.query("SELECT pg_notify($1, $2)", [channel(prefix, topic), node]),
              catch: reason
            }).pipe(
              Effect.asVoid,
              Effect.catchAll((error) => Effect.logDebug(`pg-notify: NOTIFY ${topic} failed: ${error}`))
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

    const relay = (topic: Topic, local: Effect.Effect<void>) =>
      Effect.gen(function*() {
        locals[topic].push(local)
        yield* Effect.addFinalizer(() => Effect.sync(() => locals[topic].splice(locals[topic].indexOf(local), 1)))
        return local.pipe(Effect.zipRight(outbox[topic].offer(undefined)), Effect.asVoid)
      })

    return { relay, listening: Effect.map(Ref.get(connection), Option.isSome) }
  })
