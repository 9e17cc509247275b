/**
 * `npm run bench:callbacks-throughput`: callbacks delivered per second to a loopback
 * receiver by one deliverer, signed, through the production Outbound (resolve, check,
 * pin). `BENCH_CALLBACKS` owed callbacks (default 2,000) are stored first, on the memory
 * store and on SQLite; the figure is callbacks over the time until the receiver has them
 * all, for the default concurrency (8) and for 32.
 */
import { Ids, TaskStore } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { NodeOutbound, NodeResolver } from "@mediagate/media"
import { Deliverer, Webhooks } from "@mediagate/scheduler"
import { MemoryAccounts, MemoryTaskStore } from "@mediagate/store-memory"
import { Database, SqlTaskStore } from "@mediagate/store-sql"
import { Context, Effect, Layer, Redacted } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

const callbacks = Number(process.env["BENCH_CALLBACKS"] ?? 2_000)
const secret = Webhooks.secretFromHex("00112233445566778899aabbccddeeff0011223344556677")

const main = async () => {
  let received = 0
  let done: () => void = () => {}
  const receiver = Http.createServer((request, response) => {
    request.resume()
    request.on("end", () => {
      response.writeHead(204).end()
      if (++received === callbacks) done()
    })
  })
  const port = await new Promise<number>((resolve) => receiver.listen(0, "127.0.0.1", () => resolve((receiver.address() as AddressInfo).port)))
  const url = `http://127.0.0.1:${port}/hook`
  const dir = mkdtempSync(join(tmpdir(), "mediagate-bench-callbacks-"))

  const measure = (store: Layer.Layer<TaskStore.TaskStore, unknown>, concurrency: number) =>
    Effect.scoped(
      Effect.gen(function*() {
        const context = yield* Layer.build(store)
        const tasks = Context.get(context, TaskStore.TaskStore)
        const now = Date.now()
        for (let i = 0; i < callbacks; i++) {
          const id = Ids.uuidV7(now, Array.from({ length: 10 }, () => Math.floor(Math.random() * 256)))
          const task = Testing.record({ id, status: "FAILURE", dueAt: null, callBackUrl: url, createdAt: now })
          yield* tasks.create(task, [{ id: `msg_${id}`, taskId: task.id, url, createdAt: now }])
        }
        received = 0
        const all = new Promise<void>((resolve) => (done = resolve))
        const started = performance.now()
        yield* Layer.build(
          Deliverer.layer({ concurrency }).pipe(
            Layer.provide([
              Layer.succeedContext(context),
              MemoryAccounts.layer([{ id: "acct_test", name: "t", apiKey: Redacted.make("k"), webhookSecret: Redacted.make(secret) }]),
              NodeOutbound.layer({ allowPrivate: true }).pipe(Layer.provide(NodeResolver.layer))
            ])
          )
        )
        yield* Effect.promise(() => all)
        return callbacks / ((performance.now() - started) / 1000)
      })
    )

  const rows: Array<string> = []
  let file = 0
  for (const [name, store] of [
    ["memory", () => MemoryTaskStore.layer],
    ["SQLite", () => SqlTaskStore.layer.pipe(Layer.provide(Database.layerSqlite(join(dir, `c${++file}.db`))))]
  ] as const) {
    const figures: Array<string> = []
    for (const concurrency of [8, 32]) figures.push((await Effect.runPromise(measure(store(), concurrency))).toFixed(0))
    rows.push(`| ${name} | ${figures[0]} | ${figures[1]} |`)
    console.log(rows[rows.length - 1])
  }
  receiver.close()
  rmSync(dir, { recursive: true, force: true })

  const section = [
    "<!-- bench:callbacks-throughput:start -->",
    "## Callbacks delivered per second",
    "",
    "Command: `npm run bench:callbacks-throughput` (`BENCH_CALLBACKS`, default 2,000). One",
    "deliverer, the production Outbound (each callback's host resolved, checked and pinned;",
    "a new connection per callback, since redirects and pooled connections to a client's host",
    "are not ours to keep), Standard Webhooks signatures, a loopback receiver answering 204.",
    "",
    "| store | callbacks/s, 8 at once (default) | callbacks/s, 32 at once |",
    "|---|---|---|",
    ...rows,
    "<!-- bench:callbacks-throughput:end -->"
  ].join("\n")
  const docs = new URL("../docs/benchmarks.md", import.meta.url)
  const text = readFileSync(docs, "utf8")
  writeFileSync(
    docs,
    text.includes("<!-- bench:callbacks-throughput:start -->")
      ? text.replace(/<!-- bench:callbacks-throughput:start -->[\s\S]*<!-- bench:callbacks-throughput:end -->/, section)
      : `${text.trimEnd()}\n\n${section}\n`
  )
  process.exit(0)
}

void main()
