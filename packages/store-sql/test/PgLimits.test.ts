/**
 * The edge's limits shared on PostgreSQL (`PgLimits`), two or three nodes on one fresh
 * database, each its own `make` over its own pool, time from the TestClock: a key's bucket
 * is one for all of them; the caps on held places count every node's; a node that stops
 * renewing (one that died) gives its places back once they lapse, while a live node's stay;
 * old rows are swept.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import type { SharedLimits } from "@mediagate/core"
import type { Scope } from "effect"
import { Context, Effect, Layer, Redacted, TestClock } from "effect"
import { Database, PgLimits } from "../src/index.js"
import { freshPgDatabase, pgSkipReason, pgUrl } from "../src/Testing.js"

/** A node: the shared limits over a pool of its own on `url`, with the pool's client. */
const node = (url: string, options: PgLimits.Options = {}): Effect.Effect<
  { readonly limits: Context.Tag.Service<SharedLimits.SharedLimits>; readonly sql: SqlClient.SqlClient },
  unknown,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const context = yield* Layer.build(Database.layerPg(Redacted.make(url)))
    const limits = yield* PgLimits.make(options).pipe(Effect.provide(context))
    return { limits, sql: Context.get(context, SqlClient.SqlClient) }
  })

const rate = { perSecond: 2, burst: 3 }

describe.skipIf(pgUrl === undefined)(`PgLimits${pgSkipReason("PgLimits")}`, () => {
  it.scoped("one bucket per key over every node: the burst in total, then perSecond; an idle bucket's row is swept", () =>
    Effect.gen(function*() {
      const url = yield* freshPgDatabase(pgUrl!, "limits_rate")
      const [a, b] = [yield* node(url), yield* node(url)]
      const takes = [a, b, a, b].map(({ limits }) => limits)
      const decisions = yield* Effect.forEach(takes, (limits) => limits.take("key1", rate))
      expect(decisions).toEqual([
        { _tag: "Allowed", remaining: 2 },
        { _tag: "Allowed", remaining: 1 },
        { _tag: "Allowed", remaining: 0 },
        { _tag: "Limited", retryAfterMs: 500 }
      ])
      // Another key has its own bucket.
      expect((yield* b.limits.take("key2", rate))._tag).toBe("Allowed")
      yield* TestClock.adjust("499 millis")
      expect((yield* b.limits.take("key1", rate))._tag).toBe("Limited")
      yield* TestClock.adjust("1 millis")
      expect(yield* b.limits.take("key1", rate)).toEqual({ _tag: "Allowed", remaining: 0 })
      expect((yield* a.limits.take("key1", rate))._tag).toBe("Limited")
      // A bucket full again is the same as none: the sweep (every 10 s) deletes its row.
      yield* TestClock.adjust("20 seconds")
      const rows = yield* a.sql`SELECT count(*)::int AS n FROM mediagate_rate_buckets`
      expect(rows).toEqual([{ n: 0 }])
      for (let i = 0; i < 3; i++) expect((yield* a.limits.take("key1", rate))._tag).toBe("Allowed")
      expect((yield* b.limits.take("key1", rate))._tag).toBe("Limited")
    }), 30_000)

  it.scoped("the caps on held places count every node's; a place given back is free again", () =>
    Effect.gen(function*() {
      const url = yield* freshPgDatabase(pgUrl!, "limits_hold")
      const [a, b] = [yield* node(url), yield* node(url)]
      const caps = { perKey: 2, total: 3 }
      const first = yield* a.limits.hold("key1", caps)
      expect(first._tag).toBe("Held")
      expect((yield* b.limits.hold("key1", caps))._tag).toBe("Held")
      expect(yield* a.limits.hold("key1", caps)).toEqual({ _tag: "Refused", cap: "key" })
      expect(yield* b.limits.hold("key1", caps)).toEqual({ _tag: "Refused", cap: "key" })
      expect((yield* b.limits.hold("key2", caps))._tag).toBe("Held")
      expect(yield* a.limits.hold("key3", caps)).toEqual({ _tag: "Refused", cap: "total" })
      if (first._tag === "Held") yield* a.limits.release(first.id)
      expect((yield* b.limits.hold("key1", caps))._tag).toBe("Held")
    }), 30_000)

  it.scoped("racing for a key's last places on two nodes, the per-key cap holds exactly", () =>
    Effect.gen(function*() {
      const url = yield* freshPgDatabase(pgUrl!, "limits_race")
      const [a, b] = [yield* node(url), yield* node(url)]
      const caps = { perKey: 5, total: 1_000 }
      const holds = yield* Effect.all(
        Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a : b).limits.hold("key1", caps)),
        { concurrency: "unbounded" }
      )
      expect(holds.filter((hold) => hold._tag === "Held").length).toBe(5)
    }), 30_000)

  it.scoped("a node that stops renewing (one that died) gives its places back once they lapse; a live node's stay", () =>
    Effect.gen(function*() {
      const url = yield* freshPgDatabase(pgUrl!, "limits_lapse")
      const live = yield* node(url)
      // A node that never renews within the test: what a killed node looks like to the others.
      const dead = yield* node(url, { renewEvery: "1 day" })
      const caps = { perKey: 2, total: 100 }
      expect((yield* dead.limits.hold("key1", caps))._tag).toBe("Held")
      expect((yield* dead.limits.hold("key1", caps))._tag).toBe("Held")
      expect((yield* live.limits.hold("key2", caps))._tag).toBe("Held")
      expect((yield* live.limits.hold("key2", caps))._tag).toBe("Held")
      expect(yield* live.limits.hold("key1", caps)).toEqual({ _tag: "Refused", cap: "key" })
      // Past the 30 s lifetime, with the live node renewing every 10 s.
      for (let i = 0; i < 6; i++) yield* TestClock.adjust("10 seconds")
      expect((yield* live.limits.hold("key1", caps))._tag).toBe("Held")
      expect(yield* dead.limits.hold("key2", caps)).toEqual({ _tag: "Refused", cap: "key" })
    }), 30_000)
})
