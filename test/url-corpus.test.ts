/**
 * The address corpus against the standalone server, from outside, with private addresses
 * not allowed (the production setting): every refused URL of the corpus is refused at
 * submit as `callBackUrl` and as a media URL of each kind, with 400 naming the field and the
 * rule, and nothing is created. A name that only turns out to be private when it is
 * resolved (the machine's own name, which /etc/hosts maps to loopback) passes submit and is
 * refused when we connect: the media fetch fails the task with INVALID_PARAMETERS saying
 * why, and the callback is not sent, its attempt saying why.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { lookup } from "node:dns/promises"
import { hostname } from "node:os"
import { UrlPolicy } from "@mediagate/core"
import { refusedUrls } from "../packages/core/test/AddressCorpus.js"
import { api, awaitTerminal, killAll, startServer } from "./standalone-process.js"
import { clientAt } from "./support.js"

const key = "mg_url_corpus_key_0123456789"
const notPublic = UrlPolicy.notPublicMessage

/** A loopback receiver that records what reaches it: nothing should. */
const reached: Array<string> = []
const receiver = Http.createServer((request, response) => {
  reached.push(request.url ?? "")
  response.writeHead(204).end()
})

let port = 0
let receiverPort = 0
/** What the machine's own name resolves to: a refusal must never name these (they map the network behind us). */
let addresses: ReadonlyArray<string> = []

beforeAll(async () => {
  await new Promise<void>((done) => receiver.listen(0, "127.0.0.1", done))
  receiverPort = (receiver.address() as AddressInfo).port
  addresses = (await lookup(hostname(), { all: true })).map((answer) => answer.address)
  port = (await startServer({
    MEDIAGATE_API_KEY: key,
    MEDIAGATE_DATABASE_URL: "memory",
    MEDIAGATE_SIMULATOR_PROFILE: "instant",
    MEDIAGATE_ALLOW_PRIVATE_URLS: "false"
  })).port
}, 60_000)

afterAll(async () => {
  killAll()
  await new Promise<void>((done) => receiver.close(() => done()))
})

const submit = (body: unknown) => clientAt(port, key).call("POST", "/api/v1/task/submit", { body })

/** The fields a client URL can sit in, each with a request that puts `url` there. */
const fields: ReadonlyArray<readonly [string, (url: string) => unknown, string]> = [
  ["callBackUrl", (url) => ({ model: "alpha-image-2/text-to-image", input: { prompt: "a lighthouse" }, callBackUrl: url }), `callBackUrl ${notPublic}`],
  [
    "alpha-image-2 imageUrls",
    // alpha-image-2 takes https URLs only (spec 4.1): the same hosts, over https.
    (url) => ({ model: "alpha-image-2/image-to-image", input: { prompt: "a lighthouse", imageUrls: [url.replace(/^http:/, "https:")] } }),
    `input.imageUrls[0] ${notPublic} for alpha-image-2/image-to-image`
  ],
  [
    "motion mediaUrls",
    (url) => ({ model: "motion-2.0", input: { prompt: "it moves", duration: 5, mediaUrls: ["https://example.com/a.png", url] } }),
    `input.mediaUrls[1] ${notPublic} for motion-2.0`
  ]
]

describe("the address corpus against the standalone server", () => {
  for (const [field, request, message] of fields) {
    it.each(refusedUrls)(`${field}: %s is refused at submit with 400 naming the field and the rule`, async (url) => {
      const answer = await submit(request(url))
      expect(answer).toEqual({ status: 400, body: { code: 400, msg: message } })
    })
  }

  it("none of those submits created a task", async () => {
    const answer = await api(port, key, "/api/v1/tasks")
    expect(answer.status).toBe(200)
    expect(answer.body.data.tasks).toEqual([])
  })

  it("a name that resolves to loopback passes submit and is refused at connection: the media fetch fails the task, saying why", async () => {
    const name = hostname()
    const url = `http://${name}:${receiverPort}/picture.webp`
    const secure = `https://${name}:${receiverPort}/picture.webp`
    const accepted = await submit({ model: "alpha-image-2/image-to-image", input: { prompt: "a lighthouse", imageUrls: [secure] } })
    expect(accepted.status).toBe(200)
    const motion = await submit({ model: "motion-2.0", input: { prompt: "it moves", duration: 5, mediaUrls: [url] } })
    expect(motion.status).toBe(200)
    const tasks = await awaitTerminal(port, key, [accepted.body.data.taskId, motion.body.data.taskId], 30_000)
    const image = tasks.get(accepted.body.data.taskId)!
    expect(image).toMatchObject({ status: "FAILURE", failure_reason: "INVALID_PARAMETERS", result: null })
    expect(image["error"]).toBe(`input.imageUrls[0]: ${secure}: ${name} does not resolve to a public address`)
    for (const address of addresses) expect(image["error"]).not.toContain(address)
    const video = tasks.get(motion.body.data.taskId)!
    expect(video).toMatchObject({ status: "FAILURE", failure_reason: "INVALID_PARAMETERS", result: null })
    expect(video["error"]).toMatch(new RegExp(`^input\\.mediaUrls\\[0\\]: .*${name} does not resolve to a public address$`))
    for (const address of addresses) expect(video["error"]).not.toContain(address)
    expect(reached).toEqual([])
  }, 60_000)

  it("a callback to a name that resolves to loopback is never sent; its attempt says why", async () => {
    const name = hostname()
    const accepted = await submit({ model: "alpha-image-2/text-to-image", input: { prompt: "a lighthouse" }, callBackUrl: `http://${name}:${receiverPort}/cb` })
    expect(accepted.status).toBe(200)
    const taskId = accepted.body.data.taskId as string
    expect((await awaitTerminal(port, key, [taskId], 30_000)).get(taskId)!.status).toBe("SUCCESS")
    let attempts: ReadonlyArray<any> = []
    for (let round = 0; round < 200 && attempts.length === 0; round++) {
      const answer = await api(port, key, `/api/v1/task/${taskId}/callbacks`)
      attempts = answer.body.data.callbacks[0]?.attempts ?? []
      if (attempts.length === 0) await new Promise((done) => setTimeout(done, 50))
    }
    expect(attempts[0]).toMatchObject({ attempt: 1, status_code: null })
    expect(attempts[0].error).toBe(`${name} does not resolve to a public address`)
    for (const address of addresses) expect(attempts[0].error).not.toContain(address)
    expect(reached).toEqual([])
  }, 60_000)
})
