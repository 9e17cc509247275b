/**
 * An `SqlClient` for SQLite whose connection lives in a worker thread. better-sqlite3 answers
 * synchronously: on the main thread a statement that waits on the disk (a frozen or failing
 * volume, a busy lock waited out for its timeout) held the event loop, and with it every
 * request, /healthz included (issue 33). Here the main thread sends each statement to the
 * worker and waits for its answer as for any other I/O; a stalled disk stalls only the
 * statements.
 *
 * The connection is single, as in @effect/sql-sqlite-node's client (whose shape this
 * follows): a semaphore hands it to one fiber at a time, a transaction keeps it from BEGIN to
 * COMMIT, and the worker runs what it receives in order.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlClient, SqlConnection, SqlError, Statement } from "@effect/sql"
import type Sqlite from "better-sqlite3"
import { Effect, Layer, Scope } from "effect"
import { createRequire } from "node:module"
import type * as Threads from "node:worker_threads"
import { Worker } from "node:worker_threads"
import * as Batch from "./internal/Batch.js"
import * as Exclusive from "./internal/Exclusive.js"
import * as Mutex from "./internal/Mutex.js"
import type { Row } from "./internal/Rows.js"

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

type Operation = "rows" | "raw" | "values" | "unprepared" | "batch" | "close"

/** What the main thread sends: one statement (or `close`), numbered so its answer finds its caller. */
interface Request {
  readonly id: number
  readonly op: Operation
  readonly sql: string
  readonly params: ReadonlyArray<unknown>
  readonly safeIntegers: boolean
}

/** What the worker answers: the rows (or the run's result), or the error with its SQLite code. */
interface Reply {
  readonly id: number
  readonly rows?: unknown
  readonly error?: {
    readonly message: string
    readonly code: string | undefined
    readonly stage: "open" | "prepare" | "execute"
    /** In a batch: the statement that failed (those before it ran). */
    readonly index?: number
  }
}

interface WorkerData {
  readonly driver: string
  readonly filename: string
  readonly wal: boolean
  readonly cacheSize: number
  readonly busyTimeout: number
}

/**
 * The worker's whole program. It runs in the worker as the text of this function (see
 * `source`), so it uses only its parameters: no import or other name of this module. A
 * transpiler that keeps names (tsx does) wraps its named inner functions in `__name(...)`,
 * esbuild's helper, which `source` defines.
 */
const workerProgram = (threads: typeof Threads, Driver: typeof Sqlite): void => {
  const port = threads.parentPort!
  const data = threads.workerData as WorkerData
  const fail = (id: number, stage: "open" | "prepare" | "execute", cause: unknown): Reply => ({
    id,
    error: {
      stage,
      message: cause instanceof Error ? cause.message : String(cause),
      code: typeof (cause as { code?: unknown })?.code === "string" ? (cause as { code: string }).code : undefined
    }
  })
  // Switching a fresh file to WAL takes an exclusive lock, and SQLite answers SQLITE_BUSY at
  // once, without its busy handler, when another connection holds a lock in the rollback
  // journal's mode at that moment (another client of the same file switching it too: both
  // hold a shared lock and want the exclusive one). So the open is tried again, 20 ms apart,
  // for as long as the busy timeout. This thread serves only this connection, so it can sleep
  // (Atomics.wait).
  const pause = new Int32Array(new SharedArrayBuffer(4))
  let db: Sqlite.Database | undefined
  for (let attempt = 1; db === undefined; attempt++) {
    let opened: Sqlite.Database | undefined
    try {
      opened = new Driver(data.filename, { timeout: data.busyTimeout })
      if (data.wal) opened.pragma("journal_mode = WAL")
      db = opened
    } catch (cause) {
      opened?.close()
      if ((cause as { code?: unknown })?.code !== "SQLITE_BUSY" || attempt * 20 >= data.busyTimeout) {
        port.postMessage(fail(0, "open", cause))
        return
      }
      Atomics.wait(pause, 0, 0, 20)
    }
  }
  const database = db
  // Prepared statements by text, the oldest dropped first (a Map keeps insertion order).
  const cache = new Map<string, Sqlite.Statement>()
  port.postMessage({ id: 0, rows: [] } satisfies Reply)
  /**
   * A write statement. Two kinds are not run as they are:
   * - BEGIN is tried again, 20 ms apart, while it answers SQLITE_BUSY, until the busy timeout
   *   has passed since its first try. SQLite's own busy handler gave up after about 80 ms
   *   (not the 5 s it was set to) when the standalone server's two clients migrated a fresh
   *   file at the same moment with the main thread slowed (a CPU profile on), and the server
   *   did not start (docs/decisions.md, "SQLite: BEGIN tried again, ROLLBACK of nothing").
   * - ROLLBACK with no transaction open answers nothing. SQLite ends a transaction itself on
   *   some errors, and a BEGIN that failed opened none; @effect/sql rolls back after both, and
   *   its "cannot rollback - no transaction is active" hid the error that mattered.
   */
  const write = (sql: string, statement: Sqlite.Statement, params: ReadonlyArray<unknown>): Sqlite.RunResult | undefined => {
    if (!database.inTransaction && /^\s*ROLLBACK\s*;?\s*$/i.test(sql)) return undefined
    if (!/^\s*BEGIN\b/i.test(sql)) return statement.run(...params)
    const started = Date.now()
    for (;;) {
      try {
        return statement.run(...params)
      } catch (cause) {
        if ((cause as { code?: unknown })?.code !== "SQLITE_BUSY" || Date.now() - started >= data.busyTimeout) throw cause
        Atomics.wait(pause, 0, 0, 20)
      }
    }
  }
  /** One statement; throws its failure tagged with the stage it failed at. */
  const execute = (op: Operation, sql: string, params: ReadonlyArray<unknown>, safeIntegers: boolean): unknown => {
    let statement: Sqlite.Statement | undefined
    try {
      statement = op === "unprepared" ? database.prepare(sql) : cache.get(sql)
      if (statement === undefined) {
        statement = database.prepare(sql)
        cache.set(sql, statement)
        if (cache.size > data.cacheSize) cache.delete(cache.keys().next().value!)
      }
    } catch (cause) {
      throw { stage: "prepare", cause }
    }
    try {
      statement.safeIntegers(safeIntegers)
      if (!statement.reader) {
        const result = write(sql, statement, params)
        return op === "raw" ? result ?? { changes: 0, lastInsertRowid: 0 } : []
      }
      if (op !== "values") return statement.all(...params)
      statement.raw(true)
      try {
        return statement.all(...params)
      } finally {
        statement.raw(false)
      }
    } catch (cause) {
      throw { stage: "execute", cause }
    }
  }
  port.on("message", (request: Request) => {
    if (request.op === "close") {
      database.close()
      port.close()
      return
    }
    // A batch: its statements in order, each one's rows, up to the first that fails (its index
    // on the error). A statement marked "guard" that answers no rows stops it there: the open
    // transaction is rolled back and the rows answered so far are the answer, the guard's last.
    const batch = request.op === "batch" ? request.params as ReadonlyArray<readonly [string, ReadonlyArray<unknown>, "guard"?]> : undefined
    const results: Array<unknown> = []
    try {
      if (batch === undefined) {
        port.postMessage({ id: request.id, rows: execute(request.op, request.sql, request.params, request.safeIntegers) } satisfies Reply)
        return
      }
      for (const [sql, params, guard] of batch) {
        const rows = execute("rows", sql, params, request.safeIntegers)
        results.push(rows)
        if (guard === "guard" && (rows as ReadonlyArray<unknown>).length === 0) {
          if (database.inTransaction) database.exec("ROLLBACK")
          break
        }
      }
      port.postMessage({ id: request.id, rows: results } satisfies Reply)
    } catch (failure) {
      const { cause, stage } = failure as { readonly stage: "prepare" | "execute"; readonly cause: unknown }
      const reply = fail(request.id, stage, cause)
      port.postMessage(batch === undefined ? reply : { id: request.id, error: { ...reply.error!, index: results.length } } satisfies Reply)
    }
  })
}

/**
 * What the worker evaluates: the program's text called with its two modules, after a
 * `__name` that leaves a function as it is (see `workerProgram`).
 */
const source = [
  "const __name = (target) => target;",
  "const threads = require(\"node:worker_threads\");",
  `(${workerProgram.toString()})(threads, require(threads.workerData.driver));`
].join("\n")

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
    const stopAll = (reason: string) => {
      stopped ??= reason
      const error = { message: `the SQLite worker stopped: ${stopped}`, code: undefined, stage: "execute" } as const
      for (const [id, answer] of pending) answer({ id, error })
      pending.clear()
      if (!opened) {
        opened = true
        resume(Effect.fail(sqlError({ ...error, stage: "open" })))
      }
    }
    const exited = new Promise<void>((done) => worker.once("exit", () => done()))
    worker.on("message", (reply: Reply) => {
      if (!opened) {
        opened = true
        worker.unref()
        return resume(reply.error === undefined ? Effect.succeed({ call, callWhenFree, close }) : Effect.fail(sqlError(reply.error)))
      }
      const answer = pending.get(reply.id)
      pending.delete(reply.id)
      if (pending.size === 0) worker.unref()
      answer?.(reply)
    })
    worker.on("error", (error) => stopAll(error.message))
    worker.on("exit", (code) => stopAll(`exit code ${code}`))
    /** Sends one request; `answer` gets its reply. Never throws: a request that cannot be sent is answered with its error. */
    const send = (op: Operation, sql: string, params: ReadonlyArray<unknown>, safeIntegers: boolean, answer: (reply: Reply) => void) => {
      if (stopped !== undefined) return answer({ id: 0, error: { message: `the SQLite worker stopped: ${stopped}`, code: undefined, stage: "execute" } })
      const id = ++next
      if (pending.size === 0) worker.ref()
      pending.set(id, answer)
      try {
        worker.postMessage({ id, op, sql, params, safeIntegers } satisfies Request)
      } catch (cause) {
        // A parameter that cannot be copied to the worker (a function, a symbol).
        pending.delete(id)
        if (pending.size === 0) worker.unref()
        answer({ id, error: { message: cause instanceof Error ? cause.message : String(cause), code: undefined, stage: "execute" } })
      }
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
      if (stopped === undefined) worker.postMessage({ id: 0, op: "close", sql: "", params: [], safeIntegers: false } satisfies Request)
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
    const held = connectionOf(worker.call)
    const free = connectionOf(worker.callWhenFree(lock))
    // Not enumerable, so the connection's shape is as @effect/sql-sqlite-node's.
    const batch: Batch.Batch = (statements) =>
      Effect.flatMap(SqlClient.SafeIntegers, (safe) =>
        Effect.mapError(
          worker.call("batch", "", statements, safe) as Effect.Effect<ReadonlyArray<ReadonlyArray<Row>>, NonNullable<Reply["error"]>>,
          (error) => ({ index: error.index ?? 0, error: sqlError(error) })
        ))
    Object.defineProperty(held, Batch.TypeId, { value: batch })
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
    Object.defineProperty(client, Exclusive.TypeId, { value: { connection: held, free, withLock: lock.withLock } satisfies Exclusive.Exclusive })
    return client
  })

/** `make` as a layer. */
export const layer = (options: Options): Layer.Layer<SqlClient.SqlClient, SqlError.SqlError> =>
  Layer.scoped(SqlClient.SqlClient, make(options)).pipe(Layer.provide(Reactivity.layer))
