/**
 * An `SqlClient` for SQLite whose connection lives in a worker thread. better-sqlite3 answers
 * synchronously: on the main thread a statement that waits on the disk (a frozen or failing
 * volume, a busy lock waited out for its timeout) held the event loop, and with it every
 * request, /healthz included (issue 33). Here the main thread sends each statement to the
 * worker and waits for its answer as for any other I/O; a stalled disk stalls only the
 * statements. The statements sent in one turn of the event loop travel together, in one
 * message each way. The worker's side is `internal/SqliteWorkerProgram.ts`.
 *
 * The connection is single, as in @effect/sql-sqlite-node's client (whose shape this
 * follows): a semaphore hands it to one fiber at a time, a transaction keeps it from BEGIN to
 * COMMIT, and the worker runs what it receives in order.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlClient, SqlConnection, SqlError, Statement } from "@effect/sql"
import { Effect, Layer, Scope } from "effect"
import { createRequire } from "node:module"
import { Worker } from "node:worker_threads"
import * as Batch from "./internal/Batch.js"
import * as Exclusive from "./internal/Exclusive.js"
import * as Mutex from "./internal/Mutex.js"
import type { Row } from "./internal/Rows.js"
import { type Operation, type ProcedureName, type Reply, type Request, source, type WorkerData } from "./internal/SqliteWorkerProgram.js"

/** Settings of `make`. */
export interface Options {
  /** The database file, or `:memory:`. */
  readonly filename: string
  /** Keep the rollback journal instead of WAL. Default: WAL. */
  readonly disableWAL?: boolean
  /** Prepared statements kept per connection. Default 200. */
  readonly prepareCacheSize?: number
  /** How long a statement waits for another connection's lock (SQLite's busy timeout), in ms. Default 5000. */
  readonly busyTimeout?: number
}

/**
 * better-sqlite3 as @effect/sql-sqlite-node (the peer dependency that brings it) resolves it,
 * found from this module: the worker loads it by this path.
 */
const driverPath = () => {
  const here = createRequire(import.meta.url)
  return createRequire(here.resolve("@effect/sql-sqlite-node")).resolve("better-sqlite3")
}

/** The error of a failed statement, as @effect/sql-sqlite-node words it, its SQLite code on the cause. */
const sqlError = (error: NonNullable<Reply["error"]>) =>
  new SqlError.SqlError({
    cause: Object.assign(new Error(error.message), { name: "SqliteError", code: error.code }),
    message: error.stage === "open"
      ? `Failed to open database: ${error.message}`
      : error.stage === "prepare"
      ? "Failed to prepare statement "
      : "Failed to execute statement"
  })

/** One statement (or batch) to the worker and its answer. */
type Call = (op: Operation, sql: string, params: ReadonlyArray<unknown>, safeIntegers: boolean) => Effect.Effect<unknown, NonNullable<Reply["error"]>>

/** A started worker: its calls, and its close. */
interface Started {
  readonly call: Call
  /** `call` sent once no transaction holds the lock, without holding it. */
  readonly callWhenFree: (lock: Mutex.Mutex) => Call
  readonly close: Effect.Effect<void>
}

/**
 * The worker and the calls waiting on it. While a call waits the worker keeps the process
 * alive; while none does it does not, as an idle better-sqlite3 connection did not.
 */
const start = (options: Options) =>
  Effect.async<Started, SqlError.SqlError>((resume) => {
    const worker = new Worker(source, {
      eval: true,
      workerData: {
        driver: driverPath(),
        filename: options.filename,
        wal: options.disableWAL !== true,
        cacheSize: options.prepareCacheSize ?? 200,
        busyTimeout: options.busyTimeout ?? 5000
      } satisfies WorkerData
    })
    const pending = new Map<number, (reply: Reply) => void>()
    let next = 0
    let stopped: string | undefined
    let opened = false
    /** A statement's error that SQLite did not give: the worker stopped, or its parameters could not be sent. */
    const notRun = (message: string) => ({ message, code: undefined, stage: "execute" }) as const
    const stopAll = (reason: string) => {
      stopped ??= reason
      const error = notRun(`the SQLite worker stopped: ${stopped}`)
      for (const [id, answer] of pending) answer({ id, error })
      pending.clear()
      if (!opened) {
        opened = true
        resume(Effect.fail(sqlError({ ...error, stage: "open" })))
      }
    }
    const exited = new Promise<void>((done) => worker.once("exit", () => done()))
    worker.on("message", (replies: Reply | ReadonlyArray<Reply>) => {
      if (!opened) {
        opened = true
        worker.unref()
        const reply = replies as Reply
        return resume(reply.error === undefined ? Effect.succeed({ call, callWhenFree, close }) : Effect.fail(sqlError(reply.error)))
      }
      for (const reply of replies as ReadonlyArray<Reply>) {
        const answer = pending.get(reply.id)
        pending.delete(reply.id)
        answer?.(reply)
      }
      if (pending.size === 0) worker.unref()
    })
    worker.on("error", (error) => stopAll(error.message))
    worker.on("exit", (code) => stopAll(`exit code ${code}`))
    /**
     * The requests of this turn of the event loop, sent together at its end (`setImmediate`)
     * as one message: the worker, and then this thread, are woken once for all of them, not
     * once each (a wake-up costs more than a statement: docs/benchmarks.md). They keep the
     * order they were sent in, and the worker runs them in it.
     */
    let outbox: Array<Request> = []
    const flush = () => {
      const requests = outbox
      outbox = []
      // Stopped: stopAll answered them all already.
      if (requests.length === 0 || stopped !== undefined) return
      try {
        worker.postMessage(requests)
      } catch {
        // A parameter that cannot be copied to the worker (a function, a symbol): each request
        // on its own, the one that cannot be sent answered with its error.
        for (const request of requests) {
          try {
            worker.postMessage([request])
          } catch (cause) {
            const answer = pending.get(request.id)
            pending.delete(request.id)
            answer?.({ id: request.id, error: notRun(cause instanceof Error ? cause.message : String(cause)) })
          }
        }
        if (pending.size === 0) worker.unref()
      }
    }
    /** Sends one request; `answer` gets its reply. Never throws: a request that cannot be sent is answered with its error. */
    const send = (op: Operation, sql: string, params: ReadonlyArray<unknown>, safeIntegers: boolean, answer: (reply: Reply) => void) => {
      if (stopped !== undefined) return answer({ id: 0, error: notRun(`the SQLite worker stopped: ${stopped}`) })
      const id = ++next
      if (pending.size === 0) worker.ref()
      pending.set(id, answer)
      if (outbox.length === 0) setImmediate(flush)
      outbox.push({ id, op, sql, params, safeIntegers })
    }
    const resultOf = (reply: Reply) => reply.error === undefined ? Effect.succeed(reply.rows) : Effect.fail(reply.error)
    const call = (op: Operation, sql: string, params: ReadonlyArray<unknown>, safeIntegers: boolean) =>
      Effect.async<unknown, NonNullable<Reply["error"]>>((answer) => send(op, sql, params, safeIntegers, (reply) => answer(resultOf(reply))))
    /**
     * `call` once no transaction holds the connection (`lock`), without holding it: sent
     * before the BEGIN of any transaction that takes the lock after it, so it runs on its own.
     * A caller interrupted while it waits leaves the line.
     */
    const callWhenFree = (lock: Mutex.Mutex) => (op: Operation, sql: string, params: ReadonlyArray<unknown>, safeIntegers: boolean) =>
      Effect.async<unknown, NonNullable<Reply["error"]>>((answer) => {
        const leave = lock.whenFree(() => send(op, sql, params, safeIntegers, (reply) => answer(resultOf(reply))))
        return Effect.sync(leave)
      })
    // Referenced until it has exited, so the connection closes (checkpointing the WAL) before the process ends.
    const close = Effect.promise(() => {
      worker.ref()
      if (stopped === undefined) {
        outbox.push({ id: 0, op: "close", sql: "", params: [], safeIntegers: false })
        flush()
      }
      return exited
    })
  })

/** A client on `options.filename`, its worker ended (the connection closed) with the scope. */
export const make = (options: Options): Effect.Effect<SqlClient.SqlClient, SqlError.SqlError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function*() {
    const worker = yield* Effect.acquireRelease(start(options), (started) => started.close)
    // One fiber at a time holds the connection for a transaction (internal/Mutex.ts says why
    // not a Semaphore); a statement on its own only waits until none does.
    const lock = Mutex.make()
    /** The connection through `call`: `held`, for a holder of the lock; `free`, for a statement on its own. */
    const connectionOf = (call: Call) => {
      const run = (op: Operation, sql: string, params: ReadonlyArray<unknown>) =>
        Effect.flatMap(SqlClient.SafeIntegers, (safe) => Effect.mapError(call(op, sql, params, safe), sqlError))
      const rows = (op: Operation, sql: string, params: ReadonlyArray<unknown>, transformRows: (<A extends object>(row: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined) =>
        Effect.map(run(op, sql, params), (result) => transformRows === undefined ? result as ReadonlyArray<any> : transformRows(result as ReadonlyArray<object>))
      const connection: SqlConnection.Connection = {
        execute: (sql, params, transformRows) => rows("rows", sql, params, transformRows),
        executeRaw: (sql, params) => run("raw", sql, params),
        executeValues: (sql, params) => Effect.map(run("values", sql, params), (result) => result as ReadonlyArray<ReadonlyArray<unknown>>),
        executeUnprepared: (sql, params, transformRows) => rows("unprepared", sql, params ?? [], transformRows),
        executeStream: () => Effect.dieMessage("executeStream not implemented") as never
      }
      return connection
    }
    const whenFree = worker.callWhenFree(lock)
    const held = connectionOf(worker.call)
    const free = connectionOf(whenFree)
    /** Statements in one request through `call` (`op` "batch" or "transaction"), each one's rows back. */
    const batchThrough = (call: Call, op: "batch" | "transaction"): Batch.Batch => (statements) =>
      Effect.flatMap(SqlClient.SafeIntegers, (safe) =>
        Effect.mapError(
          call(op, "", statements, safe) as Effect.Effect<ReadonlyArray<ReadonlyArray<Row>>, NonNullable<Reply["error"]>>,
          (error) => ({ index: error.index ?? 0, error: sqlError(error) })
        ))
    const batch = batchThrough(worker.call, "batch")
    // Not enumerable, so the connection's shape is as @effect/sql-sqlite-node's.
    Object.defineProperty(held, Batch.TypeId, { value: batch })
    // A transaction sent whole (BEGIN to COMMIT) once no transaction holds the lock, without
    // taking it: the worker leaves no transaction open after it (SqliteWorkerProgram), so the
    // next request runs after it as after a statement on its own. Holding the lock across
    // its round trip kept every other transaction waiting for the busy main thread to read
    // the answer (docs/decisions.md, "Issue 37, part whole transactions").
    const whole = batchThrough(whenFree, "transaction")
    // A statement through the client (`sql\`...\``) runs on its own; a transaction
    // (`sql.withTransaction`, `sql.reserve`) holds the lock from its BEGIN to its COMMIT.
    const acquirer = Effect.succeed(free)
    const transactionAcquirer = Effect.uninterruptibleMask((restore) =>
      Effect.as(
        Effect.zipRight(restore(lock.acquire), Effect.tap(Effect.scope, (scope) => Scope.addFinalizer(scope, lock.release))),
        held
      )
    )
    const client = yield* SqlClient.make({
      acquirer,
      compiler: Statement.makeCompilerSqlite(),
      transactionAcquirer,
      // Connections in other threads and processes now run truly at the same time as this
      // one: a deferred BEGIN that reads and then writes fails (SQLITE_BUSY) when another
      // connection wrote in between, which @effect/sql's migrator takes for "another node is
      // migrating" and carries on before those migrations are committed. IMMEDIATE takes the
      // write lock first, waiting (busy timeout) for the other transaction to end.
      beginTransaction: "BEGIN IMMEDIATE",
      spanAttributes: [["db.system.name", "sqlite"]]
    })
    // Not enumerable: the task store's executor takes the lock itself (internal/Exclusive.ts).
    // A procedure of the worker's (SqliteWorkerProgram), sent as a whole transaction is.
    const procedure = (name: ProcedureName, input: unknown) =>
      Effect.flatMap(SqlClient.SafeIntegers, (safe) => Effect.mapError(whenFree("procedure", name, [input], safe), sqlError))
    Object.defineProperty(client, Exclusive.TypeId, {
      value: { connection: held, batch, free, whole, procedure, acquire: lock.acquire, release: lock.release } satisfies Exclusive.Exclusive
    })
    return client
  })

/** `make` as a layer. */
export const layer = (options: Options): Layer.Layer<SqlClient.SqlClient, SqlError.SqlError> =>
  Layer.scoped(SqlClient.SqlClient, make(options)).pipe(Layer.provide(Reactivity.layer))
