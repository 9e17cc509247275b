/**
 * The edge's limits shared on PostgreSQL (`PgLimits`), two or three nodes on one fresh
 * database, each its own `make` over its own pool, time from the TestClock: a key's bucket
 * is one for all of them, a take of several tokens gets what the bucket has; each counts the
 * nodes seen recently; the caps on held places count every node's; a node that stops
 * renewing (one that died) gives its places back once they lapse, while a live node's stay;
 * old rows are swept.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import type { SharedLimits } from "@mediagate/core"
import { Chunk, Clock, Context, Duration, Effect, Exit, Layer, Redacted, Scope, TestClock } from "effect"
import { Database, PgLimits } from "../src/index.js"
import { freshPgDatabase, pgSkipReason, pgUrl } from "../src/TestDatabases.js"

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

/**
 * Moves the TestClock by `duration`, then waits until `renewing` nodes sleep again until
 * their next renewal, at most 10 s on: each renewal the jump fired has then written and swept, I/O
 * the TestClock does not wait for. Without the wait, a renewal still in flight would
 * register its next sleep only after a later jump, and that renewal would be skipped. The
 * wait is bounded by 30 s of real time, however slow the machine; past that the test's own
 * assertion says what is wrong.
 */
const advance = (duration: Duration.DurationInput, renewing: number) =>
  Effect.gen(function*() {
    yield* TestClock.adjust(duration)
    const now = yield* Clock.currentTimeMillis
    const until = Date.now() + 30_000
    // A renewal the jump fired while the clock was on its way sleeps until a little before now + 10 s.
    const pending = (at: number) => at > now && at <= now + 10_000
    while (Date.now() < until && Chunk.size(Chunk.filter(yield* TestClock.sleeps(), pending)) < renewing) {
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
    }
  })

describe.skipIf(pgUrl === undefined)(`PgLimits${pgSkipReason("PgLimits")}`, () => {
  it.scoped("one bucket per key over every node: the burst in total, then perSecond; an idle bucket's row is swept", () =>
    Effect.gen(function*() {
      const url = yield* freshPgDatabase(pgUrl!, "limits_rate")
      const [a, b] = [yield* node(url), yield* node(url)]
      const takes = [a, b, a, b].map(({ limits }) => limits)
      const taken = yield* Effect.forEach(takes, (limits) => limits.take("key1", rate, 1))
      expect(taken).toEqual([
        { granted: 1, tokens: 2 },
        { granted: 1, tokens: 1 },
        { granted: 1, tokens: 0 },
        { granted: 0, tokens: 0 }
      ])
      // Another key has its own bucket.
      expect((yield* b.limits.take("key2", rate, 1)).granted).toBe(1)
      yield* TestClock.adjust("499 millis")
      expect((yield* b.limits.take("key1", rate, 1)).granted).toBe(0)
      yield* TestClock.adjust("1 millis")
      expect(yield* b.limits.take("key1", rate, 1)).toEqual({ granted: 1, tokens: 0 })
      expect((yield* a.limits.take("key1", rate, 1)).granted).toBe(0)
      // A bucket full again is the same as none: the sweep (every 10 s) deletes its row.
      yield* advance("20 seconds", 2)
      const rows = yield* a.sql`SELECT count(*)::int AS n FROM mediagate_rate_buckets WHERE digest NOT LIKE 'node:%'`
      expect(rows).toEqual([{ n: 0 }])
      for (let i = 0; i < 3; i++) expect((yield* a.limits.take("key1", rate, 1)).granted).toBe(1)
      expect((yield* b.limits.take("key1", rate, 1)).granted).toBe(0)
    }), 30_000)

  it.scoped("a take of several tokens gets as many as the bucket has, in one statement, on a new key's row and an old one's", () =>
    Effect.gen(function*() {
      const url = yield* freshPgDatabase(pgUrl!, "limits_many")
      const [a, b] = [yield* node(url), yield* node(url)]
      // A new key: its row is the full bucket less what the take got.
      expect(yield* a.limits.take("key1", rate, 2)).toEqual({ granted: 2, tokens: 1 })
      expect(yield* b.limits.take("key1", rate, 5)).toEqual({ granted: 1, tokens: 0 })
      expect(yield* a.limits.take("key1", rate, 5)).toEqual({ granted: 0, tokens: 0 })
      expect(yield* b.limits.take("key2", rate, 7)).toEqual({ granted: 3, tokens: 0 })
      // 1.25 s at 2 a second: 2.5 tokens, two of them whole.
      yield* TestClock.adjust("1250 millis")
      expect(yield* a.limits.take("key1", rate, 9)).toEqual({ granted: 2, tokens: 0.5 })
      yield* TestClock.adjust("250 millis")
      expect(yield* b.limits.take("key1", rate, 1)).toEqual({ granted: 1, tokens: 0 })
      // Many nodes asking for a new key's tokens at once: the burst in total, no more.
      const c = yield* node(url)
      const racing = yield* Effect.all(
        Array.from({ length: 30 }, (_, i) => [a, b, c][i % 3]!.limits.take("key3", { perSecond: 0.001, burst: 10 }, 2)),
        { concurrency: "unbounded" }
      )
      expect(racing.reduce((sum, taken) => sum + taken.granted, 0)).toBe(10)
    }), 30_000)

  it.scoped("nodes: each counts the nodes seen recently; one that stops in order leaves at once, a dead one after the lifetime", () =>
    Effect.gen(function*() {
      const url = yield* freshPgDatabase(pgUrl!, "limits_nodes")
      const a = yield* node(url)
      expect(yield* a.limits.nodes).toBe(1)
      const b = yield* node(url)
      // A node counts the others when it starts, and they count it at their next renewal (every 10 s).
      expect(yield* b.limits.nodes).toBe(2)
      expect(yield* a.limits.nodes).toBe(1)
      yield* advance("10 seconds", 2)
      expect(yield* a.limits.nodes).toBe(2)
      // A third that never renews (what a killed node looks like), and a fourth that stops in order.
      const dead = yield* node(url, { renewEvery: "1 day" })
      expect(yield* dead.limits.nodes).toBe(3)
      const stopping = yield* Scope.make()
      yield* node(url).pipe(Scope.extend(stopping))
      yield* advance("10 seconds", 3)
      expect(yield* a.limits.nodes).toBe(4)
      yield* Scope.close(stopping, Exit.void)
      yield* advance("10 seconds", 2)
      expect(yield* a.limits.nodes).toBe(3)
      // The dead node's row lapses 30 s after it was written.
      yield* advance("10 seconds", 2)
      expect(yield* a.limits.nodes).toBe(2)
      expect(yield* b.limits.nodes).toBe(2)
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
      for (let i = 0; i < 6; i++) yield* advance("10 seconds", 1)
      expect((yield* live.limits.hold("key1", caps))._tag).toBe("Held")
      expect(yield* dead.limits.hold("key2", caps)).toEqual({ _tag: "Refused", cap: "key" })
    }), 30_000)
})
