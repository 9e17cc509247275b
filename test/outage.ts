/**
 * A database that goes away, without a database: the idle API (no engine) over memory
 * backends whose task store, ledger and accounts fail, while `Outage.down` is set, as a SQL
 * backend fails when its connections are refused (a StoreError whose cause is the driver's
 * ECONNREFUSED), or with another failure (`Outage.failure`).
 */
import { NodeHttpServer } from "@effect/platform-node"
import { Accounts, Ids, Ledger, ModelCatalog, Moderation, StoreError, TaskServiceAlone, TaskStore } from "@mediagate/core"
import { MediagateHttp } from "@mediagate/http"
import { MemoryAccounts, MemoryLedger, MemoryMediaStore, MemoryTaskStore } from "@mediagate/store-memory"
import type { Context } from "effect"
import { Effect, Layer, Redacted } from "effect"
import { apiKey, memoryAdmin, otherApiKey } from "./support.js"

/** The switch: while `down`, every store operation fails with `failure()`. */
export const Outage = {
  down: false,
  /** A connection refused, as node-postgres reports it under @effect/sql's SqlError. */
  failure: (): StoreError => {
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" })
    const sqlError = { _tag: "SqlError", message: "Failed to acquire connection", cause: refused }
    return new StoreError({ message: `get task failed: ${sqlError.message}`, cause: sqlError })
  }
}

/** A connection-class failure (the default `Outage.failure`). */
export const connectionRefused = Outage.failure

/** A statement the database refused: not a connection problem. */
export const syntaxError = (): StoreError => {
  const refused = Object.assign(new Error("syntax error at or near \"SELEC\""), { code: "42601" })
  return new StoreError({ message: "get task failed: syntax error", cause: { _tag: "SqlError", message: "Failed to execute statement", cause: refused } })
}

/** `service` with every method that answers an Effect failing while the outage lasts. */
const failing = <S extends object>(service: S): S =>
  new Proxy(service, {
    get(target, name, receiver) {
      const member = Reflect.get(target, name, receiver) as unknown
      if (typeof member === "function") {
        return (...args: Array<unknown>) => {
          const result = (member as (...a: Array<unknown>) => unknown).apply(target, args)
          return Effect.isEffect(result) ? Effect.suspend(() => (Outage.down ? Effect.fail(Outage.failure()) : result)) : result
        }
      }
      return Effect.isEffect(member) ? Effect.suspend(() => (Outage.down ? Effect.fail(Outage.failure()) : member)) : member
    }
  })

const failingLayer = <I, S extends object>(tag: Context.Tag<I, S>) =>
  Layer.effect(tag, Effect.map(tag, failing))

const accounts = MemoryAccounts.layer([
  { id: "acct_a", name: "a", apiKey: Redacted.make(apiKey) },
  { id: "acct_b", name: "b", apiKey: Redacted.make(otherApiKey) }
])

/** The idle API over stores that fail while `Outage.down`, on a loopback test server. */
export const outageServer = MediagateHttp.serve.pipe(
  // The admin API's services in memory, on the same store, accounts and ids (layers are memoised by reference).
  Layer.provide(memoryAdmin.pipe(Layer.provide([MemoryTaskStore.layer, accounts, Ids.layerTest]))),
  Layer.provide(
    Layer.mergeAll(
      TaskServiceAlone.layer.pipe(
        Layer.provide([
          failingLayer(TaskStore.TaskStore).pipe(Layer.provide(MemoryTaskStore.layer)),
          ModelCatalog.layer,
          Moderation.layerAllowAll,
          TaskServiceAlone.noUpstream
        ])
      ),
      failingLayer(Accounts.Accounts).pipe(Layer.provide(accounts)),
      failingLayer(Ledger.Ledger).pipe(Layer.provide(MemoryLedger.layer)),
      MemoryMediaStore.layer({ baseUrl: "http://127.0.0.1/media" }),
      ModelCatalog.layer
    ).pipe(Layer.provide(Ids.layerTest))
  ),
  Layer.provideMerge(NodeHttpServer.layerTest)
)
