/**
 * The SQLite worker's side (`SqliteWorker`): the messages between the two threads and the
 * program the worker runs.
 */
import type Sqlite from "better-sqlite3"
import type * as Threads from "node:worker_threads"
import * as ClaimInWorker from "./ClaimInWorker.js"
import * as ClaimPlan from "./ClaimPlan.js"

export type Operation = "rows" | "raw" | "values" | "unprepared" | "batch" | "transaction" | "procedure" | "close"

/**
 * What the worker can run in one call, by name: a function of a statement runner and its
 * input, run from its text (it uses no other name). It takes the write lock itself
 * (`BEGIN IMMEDIATE`) and ends its transaction; one it leaves open, by failing or not, is
 * rolled back, as a `transaction` is.
 */
export type Procedure = (execute: (sql: string, params: ReadonlyArray<unknown>) => ReadonlyArray<Record<string, unknown>>, input: any) => unknown

/** The procedures, by the name a `procedure` request gives as its `sql`. */
export type ProcedureName = "claim"

/** What the main thread sends: one statement (or `close`), numbered so its answer finds its caller. */
export interface Request {
  readonly id: number
  readonly op: Operation
  readonly sql: string
  readonly params: ReadonlyArray<unknown>
  readonly safeIntegers: boolean
}

/** What the worker answers: the rows (or the run's result), or the error with its SQLite code. */
export interface Reply {
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

export interface WorkerData {
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
const workerProgram = (threads: typeof Threads, Driver: typeof Sqlite, procedures: Record<ProcedureName, Procedure>): void => {
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
  /**
   * The reply to one request (not `close`).
   *
   * A batch: its statements in order, each one's rows, up to the first that fails (its index on
   * the error). A statement marked "guard" that answers no rows stops it there: the open
   * transaction is rolled back and the rows answered so far are the answer, the guard's last.
   *
   * A transaction is a batch from its BEGIN to its COMMIT that leaves no transaction open
   * whatever happens: one that fails, or that did not end itself, is rolled back here. So the
   * main thread need not hold the connection across its round trip: the next request runs
   * after it, as after a statement on its own.
   */
  const answer = (request: Request): Reply => {
    const batch = request.op === "batch" || request.op === "transaction"
      ? request.params as ReadonlyArray<readonly [string, ReadonlyArray<unknown>, "guard"?]>
      : undefined
    const results: Array<unknown> = []
    try {
      if (request.op === "procedure") {
        const rows = procedures[request.sql as ProcedureName]((sql, params) => execute("rows", sql, params, request.safeIntegers) as ReadonlyArray<Record<string, unknown>>, request.params[0])
        if (database.inTransaction) {
          database.exec("ROLLBACK")
          return { id: request.id, error: { message: `the procedure ${request.sql} did not end its transaction`, code: undefined, stage: "execute" } }
        }
        return { id: request.id, rows }
      }
      if (batch === undefined) return { id: request.id, rows: execute(request.op, request.sql, request.params, request.safeIntegers) }
      for (const [sql, params, guard] of batch) {
        const rows = execute("rows", sql, params, request.safeIntegers)
        results.push(rows)
        if (guard === "guard" && (rows as ReadonlyArray<unknown>).length === 0) {
          if (database.inTransaction) database.exec("ROLLBACK")
          break
        }
      }
      if (request.op === "transaction" && database.inTransaction) {
        database.exec("ROLLBACK")
        return { id: request.id, error: { message: "a transaction sent whole did not end", code: undefined, stage: "execute", index: results.length } }
      }
      return { id: request.id, rows: results }
    } catch (failure) {
      // A statement's failure carries its stage; anything else a procedure threw is its own.
      const { cause, stage } = typeof failure === "object" && failure !== null && "stage" in failure
        ? failure as { readonly stage: "prepare" | "execute"; readonly cause: unknown }
        : { stage: "execute" as const, cause: failure }
      const reply = fail(request.id, stage, cause)
      if ((request.op === "transaction" || request.op === "procedure") && database.inTransaction) database.exec("ROLLBACK")
      return batch === undefined ? reply : { id: request.id, error: { ...reply.error!, index: results.length } }
    }
  }
  type Statements = ReadonlyArray<readonly [string, ReadonlyArray<unknown>, "guard"?]>
  /** A transaction sent whole as the executor sends it: BEGIN, statements that do not end it, COMMIT. */
  const groupable = (request: Request) => {
    if (request.op !== "transaction") return false
    const statements = request.params as Statements
    if (statements.length < 2 || !/^\s*BEGIN\b/i.test(statements[0]![0]) || !/^\s*COMMIT\s*;?\s*$/i.test(statements[statements.length - 1]![0])) return false
    for (let i = 1; i < statements.length - 1; i++) if (/^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE)\b/i.test(statements[i]![0])) return false
    return true
  }
  /** The replies (of `members`, in order) of those that were to commit, made `error` at their COMMIT: they did not. */
  const uncommitted = (members: ReadonlyArray<Request>, replies: ReadonlyArray<Reply>, error: (id: number) => NonNullable<Reply["error"]>) =>
    replies.map((reply, n) => {
      const length = (members[n]!.params as Statements).length
      return reply.error === undefined && (reply.rows as ReadonlyArray<unknown>).length === length
        ? { id: reply.id, error: { ...error(reply.id), index: length - 1 } }
        : reply
    })
  /**
   * Transactions sent whole that arrive together, committed together: one BEGIN IMMEDIATE and
   * one COMMIT (one sync of the WAL) for all of them, each in a savepoint of its own, so each
   * is still all or nothing: a guard that stops one, or a statement that fails, rolls back that
   * one alone. Their replies go after the COMMIT, so none is answered before it is durable; a
   * COMMIT that fails fails them all. Where SQLite itself ended the transaction on a failure
   * (a full disk, an I/O error), the ones before it are lost with it and answered with that
   * error; the rest run alone.
   */
  const together = (members: ReadonlyArray<Request>): Array<Reply> => {
    try {
      execute("rows", "BEGIN IMMEDIATE", [], false)
    } catch (failure) {
      // As each would have failed at its own BEGIN.
      const { cause, stage } = failure as { readonly stage: "prepare" | "execute"; readonly cause: unknown }
      return members.map((member) => ({ id: member.id, error: { ...fail(member.id, stage, cause).error!, index: 0 } }))
    }
    const replies: Array<Reply> = []
    for (let m = 0; m < members.length; m++) {
      const member = members[m]!
      const statements = member.params as Statements
      const results: Array<unknown> = [[]]
      database.exec("SAVEPOINT mediagate_member")
      try {
        let stopped = false
        for (let i = 1; i < statements.length - 1 && !stopped; i++) {
          const [sql, params, guard] = statements[i]!
          const rows = execute("rows", sql, params, member.safeIntegers) as ReadonlyArray<unknown>
          results.push(rows)
          stopped = guard === "guard" && rows.length === 0
        }
        if (stopped) database.exec("ROLLBACK TO mediagate_member")
        else results.push([])
        database.exec("RELEASE mediagate_member")
        replies.push({ id: member.id, rows: results })
      } catch (failure) {
        const { cause, stage } = failure as { readonly stage: "prepare" | "execute"; readonly cause: unknown }
        const error = { ...fail(member.id, stage, cause).error!, index: results.length }
        if (database.inTransaction) {
          database.exec("ROLLBACK TO mediagate_member")
          database.exec("RELEASE mediagate_member")
          replies.push({ id: member.id, error })
          continue
        }
        return [...uncommitted(members, replies, () => error), { id: member.id, error }, ...members.slice(m + 1).map(answer)]
      }
    }
    try {
      database.exec("COMMIT")
      return replies
    } catch (cause) {
      if (database.inTransaction) database.exec("ROLLBACK")
      return uncommitted(members, replies, (id) => fail(id, "execute", cause).error!)
    }
  }
  // A message is the requests the main thread sent in one turn of its event loop, run in
  // order; their replies go back together in one message.
  port.on("message", (requests: ReadonlyArray<Request>) => {
    const replies: Array<Reply> = []
    for (let r = 0; r < requests.length; r++) {
      const request = requests[r]!
      if (request.op === "close") {
        // The replies of the requests sent before it in the same turn, which did run.
        if (replies.length > 0) port.postMessage(replies)
        database.close()
        port.close()
        return
      }
      let end = r
      while (end < requests.length && groupable(requests[end]!)) end++
      if (end - r >= 2) {
        replies.push(...together(requests.slice(r, end)))
        r = end - 1
        continue
      }
      replies.push(answer(request))
    }
    port.postMessage(replies)
  })
}

/**
 * What the worker evaluates: the program's text called with its two modules and its
 * procedures (each from its own text, as the program), after a `__name` that leaves a
 * function as it is (see `workerProgram`).
 */
export const source = [
  "const __name = (target) => target;",
  "const threads = require(\"node:worker_threads\");",
  `const makePlan = (${ClaimPlan.make.toString()});`,
  `const procedures = { claim: (execute, input) => (${ClaimInWorker.claim.toString()})(execute, input, makePlan) };`,
  `(${workerProgram.toString()})(threads, require(threads.workerData.driver), procedures);`
].join("\n")
