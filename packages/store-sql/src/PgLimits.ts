/**
 * The HTTP edge's limits on PostgreSQL (`SharedLimits`), so that they hold for every node on
 * the database: two UNLOGGED tables (migration 0017; their rows are worth nothing after a
 * crash, so they skip the WAL), named with the table prefix (`Schema.limitTables`).
 *
 * Rate limit: `<prefix>rate_buckets(digest, tokens, at, allowed, full_at)`, one row a key's
 * bucket. A take of `count` tokens is one statement, one round trip: it locks the key's row
 * (`SELECT ... FOR UPDATE`), refills the bucket from the time since its last take, takes as
 * many of the tokens as it has whole and answers how many it took and what is left; a key
 * without a row gets one, full less what it took (two nodes inserting the same new key at
 * once: the one that lost asks again). `full_at` is when the bucket would be full again: a
 * row past it is the same as no row, so the sweep deletes those.
 *
 * Nodes: each node keeps a row of its own in the same table, `node:<its name>` (a key's
 * digest never has a colon), whose `full_at` it moves `holdLifetime` ahead at start and at
 * every renewal, and counts the other nodes' rows not yet past theirs: the nodes seen
 * recently (`SharedLimits.nodes`). A node that stops in order deletes its row; a dead one's
 * is swept with the full buckets.
 *
 * Held requests: `<prefix>holds(id, node, digest, expires_at)`, one row a place. A place is
 * taken in a transaction that first takes a transaction advisory lock on the key's digest,
 * so two nodes never both take a key's last place (the per-key cap holds exactly); the
 * total cap is counted in the same statement without a lock over every key, so requests of
 * different keys racing for the very last places may pass it by a few (recorded in
 * docs/decisions.md). Every node renews the expiry of the places it holds now (and its
 * row among the nodes) every `renewEvery` (a place it gave back is no longer renewed, even if deleting it failed); a
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
 * `(digest, perSecond, burst, now, count)` and answers `(tokens, granted)`, or no row when
 * another node inserted the key's row at the same time (ask again); `hold` is
 * `(id, node, digest, expiresAt, now, perKey, total)`; `presence` is `(node row, now, until)`.
 */
export const statements = (prefix: string) => {
  const buckets = `"${prefix}rate_buckets"`
  const holds = `"${prefix}holds"`
  // Tokens a take of $5 gets from a bucket holding `tokens`: the whole ones, at most $5.
  const granted = (tokens: string) => `GREATEST(0, LEAST($5::float8, FLOOR(${tokens})))`
  return {
    // The row locked first, so that its tokens before the take (and so how many it took)
    // are the latest; refilled up to $4 (a node whose clock is behind refills nothing, never less).
    take: `WITH old AS (
        SELECT digest, LEAST($3::float8, tokens + GREATEST(0, $4::bigint - at) * $2::float8 / 1000) AS refilled,
          GREATEST(at, $4::bigint) AS at
        FROM ${buckets} WHERE digest = $1 FOR UPDATE
      ), taking AS (
        SELECT digest, refilled, at, ${granted("refilled")} AS granted FROM old
      ), updated AS (
        UPDATE ${buckets} AS b SET tokens = t.refilled - t.granted, allowed = t.granted > 0, at = t.at,
          full_at = t.at + CEIL(($3::float8 - (t.refilled - t.granted)) * 1000 / $2::float8)::bigint
        FROM taking t WHERE b.digest = t.digest
        RETURNING b.tokens, t.granted
      ), inserted AS (
        INSERT INTO ${buckets} (digest, tokens, at, allowed, full_at)
        SELECT $1, $3::float8 - n.granted, $4::bigint, n.granted > 0, $4::bigint + CEIL(n.granted * 1000 / $2::float8)::bigint
        FROM (SELECT ${granted("$3::float8")} AS granted) n
        WHERE NOT EXISTS (SELECT 1 FROM old)
        ON CONFLICT (digest) DO NOTHING
        RETURNING tokens, ${granted("$3::float8")} AS granted
      )
      SELECT tokens, granted FROM updated UNION ALL SELECT tokens, granted FROM inserted`,
    presence: `WITH me AS (
        INSERT INTO ${buckets} (digest, tokens, at, allowed, full_at) VALUES ($1, 0, $2::bigint, false, $3::bigint)
        ON CONFLICT (digest) DO UPDATE SET at = EXCLUDED.at, full_at = EXCLUDED.full_at
      )
      SELECT 1 + count(*) AS nodes FROM ${buckets} WHERE digest LIKE 'node:%' AND digest <> $1 AND full_at > $2::bigint`,
    leave: `DELETE FROM ${buckets} WHERE digest = $1`,
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

    const take = (digest: string, rate: SharedLimits.Rate, count: number): Effect.Effect<SharedLimits.Taken, StoreError> => {
      // No row answers only when another node inserted the key's row meanwhile: it is there now.
      const once = Effect.flatMap(nowMillis, (now) => run(s.take, [digest, rate.perSecond, rate.burst, now, count]))
      return Effect.repeat(once, { until: (rows) => rows.length > 0, times: 2 }).pipe(
        Effect.flatMap(([row]) =>
          row === undefined
            ? Effect.fail(new StoreError({ message: "the rate-limit bucket's row was inserted and gone again" }))
            : Effect.succeed({ granted: Number(row["granted"]), tokens: Number(row["tokens"]) })
        ),
        StoreError.refail("taking from a rate-limit bucket")
      )
    }

    // Nodes seen recently, this one included: counted at start and at each renewal.
    let nodes = 1
    const presence = Effect.flatMap(nowMillis, (now) => run(s.presence, [`node:${node}`, now, now + lifetime])).pipe(
      Effect.map(([row]) => {
        nodes = Math.max(1, Number(row?.["nodes"] ?? 1))
      })
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
      yield* presence
      yield* run(s.sweepHolds, [now])
      yield* run(s.sweepBuckets, [now])
    }).pipe(
      Effect.catchAll((error) => Effect.logWarning("shared limits: renewing this node's held places failed; trying again later", error))
    )
    const every = options.renewEvery ?? Duration.seconds(10)
    yield* presence.pipe(Effect.catchAll((error) => Effect.logWarning("shared limits: counting the nodes failed; trying again later", error)))
    yield* Effect.forkScoped(Effect.repeat(Effect.delay(renewAndSweep, every), Schedule.forever))
    // A node that stops in order gives its places back and leaves the count at once; one that dies lets them lapse.
    yield* Effect.addFinalizer(() => Effect.zip(Effect.ignore(run(s.releaseNode, [node])), Effect.ignore(run(s.leave, [`node:${node}`]))))
    return { take, hold, release, nodes: Effect.sync(() => nodes) }
  })

/** The shared limits on the PostgreSQL client in context. */
export const layer = (options: Options = {}): Layer.Layer<SharedLimits.SharedLimits, StoreError, SqlClient.SqlClient> =>
  Layer.scoped(SharedLimits.SharedLimits, make(options))
