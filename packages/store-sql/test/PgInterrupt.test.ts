/**
 * Requests that go away while they wait for a pooled PostgreSQL connection (a client that
 * disconnects mid-request interrupts its fiber) give the connection back. They used to leak
 * it: @effect/sql-pg's `reserve` drops a connection the pool hands over after its fiber was
 * interrupted, and once the pool's ten were gone the node answered nothing that needed the
 * database (found by bench:http, whose timed rounds cut the requests in flight).
 */
import { describe, expect, it } from "@effect/vitest"
import { Ids, TaskStore } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { Context, Effect, Fiber, Layer, Option, Redacted } from "effect"
import { Database, SqlTaskStore } from "../src/index.js"
import { freshPgDatabase, pgSkipReason, pgUrl } from "../src/TestDatabases.js"

describe.skipIf(pgUrl === undefined)(`the PostgreSQL pool${pgSkipReason("PgInterrupt")}`, () => {
  it.live("survives requests interrupted while they wait for a connection: afterwards every statement still runs", () =>
    Effect.gen(function*() {
      const url = yield* freshPgDatabase(pgUrl!, "interrupt")
      const built = yield* Layer.build(SqlTaskStore.layer.pipe(Layer.provide(Database.layerPg(Redacted.make(url)))))
      const store = Context.get(built, TaskStore.TaskStore)
      const task = Testing.record({ id: "0190c8a4-0000-7000-8000-00000000a001" })
      yield* store.create(task)
      const read = store.getOwned(Ids.TaskId.make(task.id), task.ownerId)
      // Six times the pool (ten connections) at once, interrupted before most got one.
      for (let round = 0; round < 5; round++) {
        const fibers = yield* Effect.forEach(Array.from({ length: 60 }), () => Effect.fork(read))
        // They start, ask the pool, and the first ten are connected or connecting.
        for (let turn = 0; turn < 3; turn++) yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        yield* Fiber.interruptAll(fibers)
      }
      const reads = yield* Effect.all(Array.from({ length: 30 }, () => read), { concurrency: "unbounded" }).pipe(
        Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error("the pool no longer answers: interrupted requests kept their connections") })
      )
      expect(reads.every((found) => Option.isSome(found) && found.value.id === task.id)).toBe(true)
    }).pipe(Effect.scoped), 60_000)
})
