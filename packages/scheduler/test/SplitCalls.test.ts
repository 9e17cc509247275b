/**
 * "Never pay twice" for a job the upstream runs as several paid calls: a dall-e-3 task of
 * three images is three calls to the OpenAI images API (the loopback fake the official
 * client is proven against), through the router and the engine, on every store backend
 * (memory, SQLite, and PostgreSQL when MEDIAGATE_TEST_PG_URL is set), timed by the TestClock.
 * One of the three calls fails once; the engine that saw it stops without a word (a crash:
 * its lease is not given back), and a new engine (a new process: its own router, adapter and
 * store connection) takes the task up once the lease ran out. The two images drawn were
 * kept on the attempt in the store: the retry asks for the one missing, and the task
 * succeeds with all three.
 */
import { FetchHttpClient } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Ids, MediaStore, ModelCatalog, TaskServiceAlone, TaskStore, Upstream } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryMediaStore, MemoryTaskStore } from "@mediagate/store-memory"
import { Database, SqlTaskStore } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import { OpenAiImages, Png, Router } from "@mediagate/upstream"
import { Context, Effect, Exit, Layer, Option, Redacted, Scope, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll } from "vitest"
import * as FakeOpenAi from "../../upstream/test/fakes/FakeOpenAi.js"
import * as FakeServer from "../../upstream/test/fakes/FakeServer.js"
import { Engine } from "../src/index.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-split-"))
let api: FakeOpenAi.FakeOpenAi
beforeAll(async () => {
  api = await FakeOpenAi.start({ key: "sk-test" })
})
afterAll(async () => {
  await api.close()
  rmSync(dir, { recursive: true, force: true })
})
let files = 0

/** Each backend as a way to open its store: every call a new connection to the same data (memory: the one store). */
type Opens = Effect.Effect<() => Effect.Effect<Context.Context<TaskStore.TaskStore>, unknown, Scope.Scope>, unknown, Scope.Scope>
const backends: ReadonlyArray<readonly [string, Opens]> = [
  ["memory", Effect.map(Layer.build(MemoryTaskStore.layer), (store) => () => Effect.succeed(store))],
  ["sqlite", Effect.sync(() => {
    const file = join(dir, `s${++files}.db`)
    return () => Layer.build(SqlTaskStore.layer.pipe(Layer.provide(Database.layerSqlite(file))))
  })],
  ...(pgUrl === undefined ? [] : [[
    "postgres",
    Effect.map(freshPgDatabase(pgUrl, "split"), (url) => () => Layer.build(SqlTaskStore.layer.pipe(Layer.provide(Database.layerPg(Redacted.make(url))))))
  ] as const])
]
pgSkipReason("SplitCalls")

const cdn = "https://cdn.mediagate.test/media/"
const generations = () => api.requests.filter((request) => request.path === "/v1/images/generations")

/** The deployment's upstream as a new process builds it: the router with the OpenAI adapter, dall-e-3 for alpha-image-2. */
const upstream = (media: Context.Context<MediaStore.MediaStore>) =>
  Layer.effect(
    Upstream.Upstream,
    Effect.flatMap(OpenAiImages.make({ key: "sk-test", baseUrl: api.url }), (openai) =>
      Router.make({
        routes: [{ model: "alpha-image-2", targets: [{ provider: "openai", model: "dall-e-3", input: (job) => OpenAiImages.defaultInput(job, "dall-e-3") }] }],
        providers: [openai]
      }))
  ).pipe(Layer.provide([FetchHttpClient.layer, Layer.succeedContext(media)]))

/**
 * Event-loop turns (the fake's answers and the store's I/O are real) until `done` holds; the
 * bound is real time, as a loaded machine may take long.
 */
const until = <E, R>(what: string, done: Effect.Effect<boolean, E, R>) =>
  Effect.gen(function*() {
    const limit = performance.now() + 20_000
    while (!(yield* done)) {
      if (performance.now() > limit) return yield* Effect.dieMessage(`never: ${what}`)
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    }
  })

for (const [name, opens] of backends) {
  describe(`A split job on ${name}`, () => {
    it.scoped("one of three dall-e-3 calls fails, the engine crashes, and the next one asks only for the missing image", () =>
      Effect.gen(function*() {
        const open = yield* opens
        const media = yield* Layer.build(MemoryMediaStore.layer({ baseUrl: cdn }).pipe(Layer.provide(Ids.layer)))
        /**
         * An engine (a process of its own) on a new connection to the store, after `before`
         * ran on it; stopping it gives nothing back, as a crash.
         */
        const engine = (before: (store: TaskStore.TaskStore["Type"]) => Effect.Effect<unknown, unknown> = () => Effect.void) => Effect.gen(function*() {
          const store = yield* open()
          yield* before(Context.get(store, TaskStore.TaskStore))
          yield* Layer.build(
            Engine.layer({ pollInterval: "1 second", releaseOnStop: false }).pipe(
              Layer.provide(TaskServiceAlone.writes),
              Layer.provide([upstream(media), Ids.layerTest, ModelCatalog.layer, Layer.succeedContext(store)])
            )
          )
          return Context.get(store, TaskStore.TaskStore)
        })
        const get = (store: TaskStore.TaskStore["Type"]) => Effect.map(store.get(Ids.TaskId.make("t1")), Option.getOrThrow)
        const before = generations().length
        // Exactly one of the three calls fails, once.
        api.failNext(FakeOpenAi.serverError(), { path: /\/v1\/images\/generations$/ })

        const first = yield* Scope.make()
        // The task is there before the engine starts: its first look at the store claims it.
        const store = yield* Scope.extend(engine((store) => store.create(Testing.record({ id: "t1", job: Testing.job({ n: 3 }) }))), first)
        yield* until("the failed submit was written", Effect.map(get(store), (task) => task.attempts[0]?.transientFailures === 1))
        const failed = yield* get(store)
        expect(generations().length - before).toBe(3)
        expect(failed.status).toBe("PROCESSING")
        expect(failed.attempts).toHaveLength(1)
        expect(failed.attempts[0]).toMatchObject({ outcome: "running", transientFailures: 1 })
        const kept = failed.attempts[0]!.partialResult?.urls ?? []
        expect(kept).toHaveLength(2)
        // The crash: the engine stops, keeping its lease.
        yield* Scope.close(first, Exit.void)

        const second = yield* engine()
        // Past the backoff and the dead worker's lease.
        for (let i = 0; i < 20; i++) {
          yield* TestClock.adjust("1 second")
          yield* until("the store answered", Effect.as(get(second), true))
        }
        yield* until("the task succeeded", Effect.map(get(second), (task) => task.status === "SUCCESS"))
        const done = yield* get(second)
        // Three calls, then one for the image missing.
        expect(generations().slice(before).map((request) => FakeServer.json(request).n)).toEqual([1, 1, 1, 1])
        expect(done.result?.urls).toHaveLength(3)
        expect(done.result?.urls.slice(0, 2)).toEqual(kept)
        expect(done.attempts).toHaveLength(1)
        expect(done.attempts[0]).toMatchObject({ outcome: "succeeded", transientFailures: 1 })
        const stored = Context.get(media, MediaStore.MediaStore)
        for (const url of done.result!.urls) {
          const file = Option.getOrThrow(yield* stored.get(url.slice(cdn.length)))
          expect(Png.readPngSize(file.bytes)).toEqual({ width: 1792, height: 1024 })
        }
      }))
  })
}
