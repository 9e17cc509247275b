/**
 * The HTTP edge's limits on PostgreSQL (`SharedLimits`), so that they hold for every node on
 * the database: two UNLOGGED tables (migration 0017; their rows are worth nothing after a
 * crash, so they skip the WAL), named with the table prefix (`Schema.limitTables`).
 *
 * Rate limit: `<prefix>rate_buckets(digest, tokens, at, allowed, full_at)`, one row a key's
 * bucket. A take is one statement, one round trip: `INSERT ... ON CONFLICT DO UPDATE ...
 * RETURNING` refills the bucket from the time since its last take, takes a token if there is
 * one and answers what it did. `full_at` is when the bucket would be full again: a row past
 * it is the same as no row, so the sweep deletes those.
 *
 * Held requests: `<prefix>holds(id, node, digest, expires_at)`, one row a place. A place is
 * taken in a transaction that first takes a transaction advisory lock on the key's digest,
 * so two nodes never both take a key's last place (the per-key cap holds exactly); the
 * total cap is counted in the same statement without a lock over every key, so requests of
 * different keys racing for the very last places may pass it by a few (recorded in
 * docs/decisions.md). Every node renews the expiry of the places it holds now every
 * `renewEvery` (a place it gave back is no longer renewed, even if deleting it failed); a
 * place lapses `holdLifetime` after its last renewal, so a node that died (SIGKILL) gives its
 * places back within that time. Places not renewed and buckets full again are deleted by
 * the same periodic sweep. Times are whole Clock milliseconds (rounded up): PostgreSQL's
 * BIGINT refuses a fraction.
 */
import type { SqlClient } from "@effect/sql"
import { SharedLimits, StoreError } from "@mediagate/core"
import type { Context, Scope } from "effect"
import { Clock, Duration, Effect, Layer, Random, Schedule } from "effect"
import * as Database from "./Database.js"
import * as Executor from "./internal/Executor.js"

/** Settings of the shared limits. */
export interface Options extends Database.Options {
  /** How often a node renews its places and sweeps old rows. Default 10 s. */
  readonly renewEvery?: Duration.DurationInput
  /** How long a place lasts after its last renewal. Default 30 s. */
  readonly holdLifetime?: Duration.DurationInput
}

/**
 * The statements on `prefix`'s tables, PostgreSQL's parameters numbered. `take` is
 * `(digest, perSecond, burst, now)`; `hold` is `(id, node, digest, expiresAt, now, perKey, total)`.
 */
export const statements = (prefix: string) => {
  const buckets = `"${prefix}rate_buckets"`
  const holds = `"${prefix}holds"`
  // The bucket as refilled up to $4 (a node whose clock is behind refills nothing, never less).
  const refilled = `LEAST($3::float8, b.tokens + GREATEST(0, $4::bigint - b.at) * $2::float8 / 1000)`
  return {
    take: `INSERT INTO ${buckets} AS b (digest, tokens, at, allowed, full_at)
      VALUES ($1, $3::float8 - 1, $4::bigint, true, $4::bigint + CEIL(1000 / $2::float8)::bigint)
      ON CONFLICT (digest) DO UPDATE SET
        tokens = CASE WHEN ${refilled} >= 1 THEN ${refilled} - 1 ELSE ${refilled} END,
        allowed = ${refilled} >= 1,
        at = GREATEST(b.at, $4::bigint),
        full_at = GREATEST(b.at, $4::bigint)
          + CEIL(($3::float8 - CASE WHEN ${refilled} >= 1 THEN ${refilled} - 1 ELSE ${refilled} END) * 1000 / $2::float8)::bigint
      RETURNING tokens, allowed`,
    lock: `SELECT pg_advisory_xact_lock(hashtext($1))`,
    hold: `WITH held AS (
        SELECT count(*) FILTER (WHERE digest = $3) AS mine, count(*) AS every FROM ${holds} WHERE expires_at > $5::bigint
      ), taken AS (
        INSERT INTO ${holds} (id, node, digest, expires_at)
        SELECT $1, $2, $3, $4::bigint FROM held WHERE held.mine < $6::bigint AND held.every < $7::bigint
        RETURNING id
      )
      SELECT held.mine, held.every, (SELECT count(*) FROM taken) AS taken FROM held`,
    release: `DELETE FROM ${holds} WHERE id = $1`,
    renew: `UPDATE ${holds} SET expires_at = $2::bigint WHERE id = ANY($1::text[])`,
    sweepHolds: `DELETE FROM ${holds} WHERE expires_at <= $1::bigint`,
    sweepBuckets: `DELETE FROM ${buckets} WHERE full_at <= $1::bigint`,
    releaseNode: `DELETE FROM ${holds} WHERE node = $1`
  }
}

/** The Clock's time in whole milliseconds, rounded up. */
const nowMillis = Effect.map(Clock.currentTimeMillis, Math.ceil)

/** A random name: a node's, a place's. */
const randomName = Effect.map(
  Effect.all([Random.nextIntBetween(0, 2 ** 31), Random.nextIntBetween(0, 2 ** 31)]),
  ([a, b]) => `${a.toString(36)}${b.toString(36)}`
)

/**
 * The shared limits of one node, on the PostgreSQL client in context, renewing this node's
 * places and sweeping old rows for the scope's lifetime; its places are given back when the
 * scope closes. Runs the migrations first; fails on another database.
 */
export const make = (options: Options = {}): Effect.Effect<
  Context.Tag.Service<SharedLimits.SharedLimits>,
  StoreError,
  SqlClient.SqlClient | Scope.Scope
> =>
  Effect.gen(function*() {
    const { isPg, sql } = yield* Database.prepare("the shared limits", options)
    if (!isPg) return yield* new StoreError({ message: "the shared limits need PostgreSQL" })
    const prefix = options.tablePrefix ?? Database.defaultPrefix
    const s = statements(prefix)
    const lifetime = Duration.toMillis(options.holdLifetime ?? Duration.seconds(30))
    const node = yield* randomName
    // The places this node holds now: the ones it renews.
    const live = new Set<string>()
    // Statements on a pooled connection each, as the ledger runs them (`Executor.perOperation`):
    // uninterruptible, so a request whose client goes away mid-take leaks no connection, and
    // without the query builder's machinery around each statement.
    const executor = Executor.perOperation(sql, "BEGIN")
    const run = executor.run

    const take = (digest: string, rate: SharedLimits.Rate): Effect.Effect<SharedLimits.Decision, StoreError> =>
      Effect.flatMap(nowMillis, (now) => run(s.take, [digest, rate.perSecond, rate.burst, now])).pipe(
        Effect.map(([row]): SharedLimits.Decision => {
          const tokens = Number(row?.["tokens"])
          return row?.["allowed"] === true
            ? { _tag: "Allowed", remaining: Math.floor(tokens) }
            : { _tag: "Limited", retryAfterMs: Math.ceil(((1 - tokens) / rate.perSecond) * 1000) }
        }),
        StoreError.refail("taking from a rate-limit bucket")
      )

    const hold = (digest: string, caps: SharedLimits.Caps): Effect.Effect<SharedLimits.Hold, StoreError> =>
      Effect.gen(function*() {
        const now = yield* nowMillis
        const id = `${node}_${yield* randomName}`
        return yield* executor.transaction((run) => Effect.gen(function*() {
          yield* run(s.lock, [`${prefix}holds:${digest}`])
          const [row] = yield* run(s.hold, [id, node, digest, now + lifetime, now, caps.perKey, caps.total])
          if (Number(row?.["taken"]) > 0) return { _tag: "Held", id } as const
          return { _tag: "Refused", cap: Number(row?.["mine"]) >= caps.perKey ? "key" : "total" } as const
        }))
      }).pipe(
        Effect.tap((hold) => {
          if (hold._tag === "Held") live.add(hold.id)
        }),
        StoreError.refail("taking a place for a held request")
      )

    const release = (id: string): Effect.Effect<void, StoreError> =>
      Effect.suspend(() => {
        live.delete(id)
        return run(s.release, [id])
      }).pipe(Effect.asVoid, StoreError.refail("giving back a place of a held request"))

    const renewAndSweep = Effect.gen(function*() {
      const now = yield* nowMillis
      if (live.size > 0) yield* run(s.renew, [[...live], now + lifetime])
      yield* run(s.sweepHolds, [now])
      yield* run(s.sweepBuckets, [now])
    }).pipe(
      Effect.catchAll((error) => Effect.logWarning("shared limits: renewing this node's held places failed; trying again later", error))
    )
    const every = options.renewEvery ?? Duration.seconds(10)
    yield* Effect.forkScoped(Effect.repeat(Effect.delay(renewAndSweep, every), Schedule.forever))
    // A node that stops in order gives its places back at once; one that dies lets them lapse.
    yield* Effect.addFinalizer(() => Effect.ignore(run(s.releaseNode, [node])))
    return { take, hold, release }
  })

/** The shared limits on the PostgreSQL client in context. */
export const layer = (options: Options = {}): Layer.Layer<SharedLimits.SharedLimits, StoreError, SqlClient.SqlClient> =>
  Layer.scoped(SharedLimits.SharedLimits, make(options))
