/**
 * Provider webhooks, black box: the standalone server with a routes file sending
 * dream-4 to a loopback fake of fal's queue API and compact-image to one of Replicate's
 * predictions API (their jobs run until told to finish). fal's signed webhook finishes the
 * task at once, long before the first safety-net poll; a webhook with a bad signature is
 * refused and wakes nothing; Replicate's `logs` webhooks (asked for with
 * MEDIAGATE_REPLICATE_WEBHOOK_EVENTS) refresh the task's progress and leave it running, its
 * `completed` one ends it, also when it comes while a poll is in flight; a model without a
 * route runs on the simulator, as MEDIAGATE_UNROUTED asks. Waits on a real process, so it
 * polls with short pauses; nothing in it measures time.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as pause } from "node:timers/promises"
import * as FakeFal from "../packages/upstream/test/fakes/FakeFal.js"
import * as FakeReplicate from "../packages/upstream/test/fakes/FakeReplicate.js"
import { api, killAll, type Server, startServer, stop, submit } from "./standalone-process.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-webhooks-"))
const key = "webhooks-key-0123456789"
let fal: Awaited<ReturnType<typeof FakeFal.start>>
let replicate: Awaited<ReturnType<typeof FakeReplicate.start>>
/** What each Replicate prediction has logged so far, by its id: the test writes it. */
const printed = new Map<string, string>()
let server: Server
let port: number
/**
 * The server's public URL: a loopback front passing every request on to it, as a reverse
 * proxy would. It is known before the server starts, which listens on a port the system chooses.
 */
let front: Http.Server
let publicUrl: string

beforeAll(async () => {
  fal = await FakeFal.start({ key: "fal-key", steps: Infinity })
  replicate = await FakeReplicate.start({ token: "r8-token", processing: Infinity, logs: (p) => printed.get(p.id) ?? "" })
  const routes = join(dir, "routes.json")
  writeFileSync(routes, JSON.stringify({
    routes: [
      { model: "dream-4", targets: [{ provider: "fal", model: "fal-ai/flux/dev", input: { prompt: "$prompt", num_images: "$n" } }] },
      { model: "compact-image", targets: [{ provider: "replicate", model: "o/m", input: { prompt: "$prompt", num_outputs: "$n" } }] }
    ]
  }))
  front = Http.createServer((request, response) => {
    const passed = Http.request({ host: "127.0.0.1", port, path: request.url, method: request.method, headers: request.headers }, (answer) => {
      response.writeHead(answer.statusCode!, answer.headers)
      answer.pipe(response)
    })
    passed.on("error", () => response.writeHead(502).end())
    request.pipe(passed)
  })
  await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve))
  publicUrl = `http://127.0.0.1:${(front.address() as AddressInfo).port}`
  server = await startServer({
    MEDIAGATE_API_KEY: key,
    MEDIAGATE_DATABASE_URL: "memory",
    MEDIAGATE_PUBLIC_URL: publicUrl,
    MEDIAGATE_ROUTES: routes,
    FAL_KEY: "fal-key",
    MEDIAGATE_FAL_URL: fal.url,
    MEDIAGATE_FAL_JWKS_URL: fal.jwksUrl,
    REPLICATE_API_TOKEN: "r8-token",
    MEDIAGATE_REPLICATE_URL: replicate.url,
    MEDIAGATE_REPLICATE_WEBHOOK_EVENTS: "logs,completed",
    MEDIAGATE_WEBHOOK_PREFIX: "/hooks/in",
    MEDIAGATE_UNROUTED: "simulator",
    MEDIAGATE_SIMULATOR_PROFILE: "instant"
  })
  port = server.port
}, 60_000)

afterAll(async () => {
  await stop(server, "SIGTERM")
  killAll()
  await fal.close()
  await replicate.close()
  await new Promise((resolve) => front.close(resolve))
  rmSync(dir, { recursive: true, force: true })
})

/** The task as the server shows it. */
const task = async (taskId: string) => (await api(port, key, `/api/v1/task/${taskId}`)).body.data

/** Waits until `check` holds for the task, or `limitMs` passed; answers the task as last seen. */
const until = async (taskId: string, check: (t: any) => boolean, limitMs: number) => {
  const end = Date.now() + limitMs
  for (;;) {
    const seen = await task(taskId)
    if (check(seen) || Date.now() > end) return seen
    await pause(100)
  }
}

describe("provider webhooks", () => {
  it("fal's signed webhook finishes the task at once; polls wait as a safety net", { timeout: 60_000 }, async () => {
    // dream-4: its results are returned as the provider gave them (alpha-image-2's would be
    // copied to our storage, and fal's fake result URL names a host this machine cannot reach).
    const taskId = await submit(port, key, "dream-4", "a webhook lighthouse")
    const accepted = await until(taskId, (t) => t.attempts[0]?.upstream_id !== null && t.attempts[0]?.upstream_id !== undefined, 10_000)
    const requestId = accepted.attempts[0].upstream_id as string
    const job = fal.jobs.get(requestId)!
    expect(job.webhook).toBe(`${publicUrl}/hooks/in/fal/${taskId}`)

    // A forged webhook: refused, and the task is not woken.
    const forged = await fetch(job.webhook!, {
      method: "POST",
      headers: { "content-type": "application/json", ...FakeFal.signWebhook(requestId, "{}", Math.floor(Date.now() / 1000)) },
      body: JSON.stringify({ request_id: requestId, status: "OK" })
    })
    expect(forged.status).toBe(401)
    expect(await forged.json()).toEqual({ code: 401, msg: "the webhook's signature is not valid" })
    const unknown = await fetch(`http://127.0.0.1:${port}/hooks/in/nobody/${taskId}`, { method: "POST", body: "{}" })
    expect(unknown.status).toBe(401)

    // The job ends at fal, and fal says so.
    expect(await fal.complete(requestId)).toBe(200)
    const done = await until(taskId, (t) => t.status === "SUCCESS", 10_000)
    expect(done.status).toBe("SUCCESS")
    expect(done.result).toEqual({ type: "image", urls: ["https://fal.media/files/req-1-0.png"] })
    // One status call at most came before the webhook: the first safety-net poll is 30 s away.
    expect(job.statusCalls).toBeLessThanOrEqual(2)
  })

  it("Replicate's logs webhooks refresh the task's progress and leave it running; its completed webhook ends it", { timeout: 60_000 }, async () => {
    const taskId = await submit(port, key, "compact-image", "a logged lighthouse")
    const accepted = await until(taskId, (t) => t.attempts[0]?.upstream_id !== null && t.attempts[0]?.upstream_id !== undefined, 10_000)
    const id = accepted.attempts[0].upstream_id as string
    const prediction = replicate.predictions.get(id)!
    expect(prediction.webhook).toBe(`${publicUrl}/hooks/in/replicate/${taskId}`)
    expect(prediction.events).toEqual(["logs", "completed"])
    // No poll yet: the first safety-net poll is 30 s away.
    expect(prediction.gets).toBe(0)

    // The model prints a line and half its progress bar; Replicate sends the logs event.
    prediction.status = "processing"
    printed.set(id, "Using seed: 42\n 50%|█████     | 2/4 [00:00<00:00,  4.12it/s]\n")
    expect(await replicate.logged(id)).toBe(200)
    const half = await until(taskId, (t) => t.progress?.percent === 50, 10_000)
    expect(half.status).toBe("PROCESSING")
    expect(half.progress).toMatchObject({ stage: "running", queue_position: null, percent: 50, logs_tail: ["Using seed: 42", " 50%|█████     | 2/4 [00:00<00:00,  4.12it/s]"] })

    // Later (progress is written at most every 500 ms per task), the bar moves on.
    await pause(600)
    printed.set(id, `${printed.get(id)!}100%|██████████| 4/4 [00:00<00:00,  4.30it/s]\n`)
    expect(await replicate.logged(id)).toBe(200)
    const full = await until(taskId, (t) => t.progress?.percent === 100, 10_000)
    expect(full.status).toBe("PROCESSING")
    expect(full.result).toBeNull()

    // The prediction ends at Replicate, and Replicate says so.
    expect(await replicate.complete(id)).toBe(200)
    const done = await until(taskId, (t) => t.status === "SUCCESS", 10_000)
    expect(done.status).toBe("SUCCESS")
    expect(done.result).toEqual({ type: "image", urls: ["https://replicate.delivery/out-0.webp"] })
    // One poll per webhook: nothing polled on its own.
    expect(prediction.gets).toBe(3)
  })

  it("a completed webhook that comes while a poll is in flight ends the task once the poll has written", { timeout: 60_000 }, async () => {
    const taskId = await submit(port, key, "compact-image", "a lighthouse logged in a hurry")
    const accepted = await until(taskId, (t) => t.attempts[0]?.upstream_id !== null && t.attempts[0]?.upstream_id !== undefined, 10_000)
    const id = accepted.attempts[0].upstream_id as string
    const prediction = replicate.predictions.get(id)!
    prediction.status = "processing"
    printed.set(id, " 25%|██▌       | 1/4 [00:00<00:00,  4.12it/s]\n")
    // The logs event brings a poll, whose answer (still processing) is held 1.5 s; the
    // prediction ends meanwhile and Replicate sends its completed event.
    replicate.holdNext(1_500, { path: new RegExp(`^/v1/predictions/${id}$`) })
    expect(await replicate.logged(id)).toBe(200)
    for (const end = Date.now() + 10_000; prediction.gets === 0 && Date.now() < end;) await pause(20)
    expect(prediction.gets).toBe(1)
    expect(await replicate.complete(id)).toBe(200)
    // Without the wait for the poll's write, the next poll would be the safety net's, 30 s on.
    const done = await until(taskId, (t) => t.status === "SUCCESS", 10_000)
    expect(done.status).toBe("SUCCESS")
    expect(prediction.gets).toBe(2)
  })

  it("a model without a route runs on the simulator when MEDIAGATE_UNROUTED=simulator", { timeout: 30_000 }, async () => {
    expect(server.output()).toContain("other models: simulator (instant)")
    const taskId = await submit(port, key, "canvas-2.0", "an unrouted canvas")
    const done = await until(taskId, (t) => t.status === "SUCCESS", 20_000)
    expect(done.status).toBe("SUCCESS")
    expect(done.attempts).toMatchObject([{ provider: "simulator", outcome: "succeeded" }])
    expect([...fal.jobs.values()].some((job) => job.input["prompt"] === "an unrouted canvas")).toBe(false)
  })
})
