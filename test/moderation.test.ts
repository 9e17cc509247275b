/**
 * Moderation in the standalone server, from outside: the built-in local rules (the default),
 * an operator's rules file, an OpenAI-compatible moderation API (a loopback fake speaking its
 * protocol) and that API down, failing closed (503, nothing created) or open. Every rejection
 * is the spec's 400 with all 13 categories, and creates no task.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { spawn } from "node:child_process"
import { blockedByCategory, disguises, innocent } from "../packages/core/test/LookAlikes.js"
import * as FakeOpenAi from "../packages/upstream/test/fakes/FakeOpenAi.js"
import type * as FakeServer from "../packages/upstream/test/fakes/FakeServer.js"
import { nodeArgs } from "./programs.js"
import { api, killAll, startServer, stop } from "./standalone-process.js"
import { clientAt } from "./support.js"

const key = "mg-moderation-test-key"
const categories = [
  "harassment", "harassment/threatening", "sexual", "hate", "hate/threatening", "illicit", "illicit/violent",
  "self-harm/intent", "self-harm/instructions", "self-harm", "sexual/minors", "violence", "violence/graphic"
]
let dir: string
let openai: FakeServer.FakeServer

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "mediagate-moderation-"))
  openai = await FakeOpenAi.start({ key: "sk-moderation" })
})
afterAll(async () => {
  killAll()
  await openai.close()
  rmSync(dir, { recursive: true, force: true })
})

const serve = async (env: Record<string, string>) => {
  const server = await startServer({
    MEDIAGATE_DATABASE_URL: "memory",
    MEDIAGATE_API_KEY: key,
    MEDIAGATE_SIMULATOR_PROFILE: "instant",
    MEDIAGATE_MEDIA_DIR: mkdtempSync(join(dir, "media-")),
    ...env
  })
  return { port: server.port, server }
}

const submit = (port: number, prompt: string) =>
  clientAt(port, key).submit({ model: "alpha-image-2/text-to-image", input: { prompt } })

const tasksOf = async (port: number) => (await api(port, key, "/api/v1/tasks")).body.data.tasks as Array<unknown>

const rejected = (flagged: ReadonlyArray<string>) => ({
  code: 400,
  msg: "content rejected by moderation",
  data: { flagged: true, categories: Object.fromEntries(categories.map((category) => [category, flagged.includes(category)])) }
})

describe("moderation in the standalone server", () => {
  it("the built-in local rules by default: a plain request for gore is refused with all 13 keys, nothing created", { timeout: 60_000 }, async () => {
    const { port, server } = await serve({})
    expect(await submit(port, "a battlefield full of gore")).toEqual({ status: 400, body: rejected(["violence", "violence/graphic"]) })
    expect((await submit(port, "a lighthouse at dusk")).status).toBe(200)
    expect(await tasksOf(port)).toHaveLength(1)
    await stop(server, "SIGTERM")
  })

  it("a blocked prompt of every category rewritten with Cyrillic or Greek look-alikes is refused as the plain one is; genuine Cyrillic and Greek pass (issue 33)", { timeout: 60_000 }, async () => {
    const { port, server } = await serve({})
    const missed: Array<string> = []
    for (const [category, prompt, flagged] of blockedByCategory) {
      expect(await submit(port, prompt)).toEqual({ status: 400, body: rejected(flagged) })
      for (const [how, text] of disguises(prompt)) {
        const answer = await submit(port, text)
        if (JSON.stringify(answer) !== JSON.stringify({ status: 400, body: rejected(flagged) })) {
          missed.push(`${category}, ${how}: ${text} answered ${answer.status} ${JSON.stringify(answer.body)}`)
        }
      }
    }
    expect(missed).toEqual([])
    for (const prompt of innocent) expect([prompt, (await submit(port, prompt)).status]).toEqual([prompt, 200])
    expect(await tasksOf(port)).toHaveLength(innocent.length)
    await stop(server, "SIGTERM")
  })

  it("an operator's rules file adds its words; a bad file stops the start with one line", { timeout: 60_000 }, async () => {
    const rules = join(dir, "rules.json")
    writeFileSync(rules, JSON.stringify({ categories: { illicit: { words: ["moonshine still"] } } }))
    const { port, server } = await serve({ MEDIAGATE_MODERATION_RULES: rules })
    expect(await submit(port, "an old moonshine still in the woods")).toEqual({ status: 400, body: rejected(["illicit"]) })
    expect((await submit(port, "gore everywhere")).status).toBe(400)
    await stop(server, "SIGTERM")

    const bad = join(dir, "bad.json")
    writeFileSync(bad, JSON.stringify({ categories: { violense: { words: ["x"] } } }))
    const exit = await new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn(process.execPath, nodeArgs("server"), {
        env: { ...process.env, MEDIAGATE_PORT: "0", MEDIAGATE_DATABASE_URL: "memory", MEDIAGATE_MODERATION_RULES: bad },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
      child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
      child.on("exit", (code) => resolve({ code, output }))
    })
    expect(exit.code).toBe(1)
    expect(exit.output.trim().split("\n")[0]).toMatch(new RegExp(`^mediagate: cannot start: MEDIAGATE_MODERATION_RULES: ${bad}: the moderation rules file is not valid`))
    expect(exit.output).toContain("violense")
  })

  it("an OpenAI-compatible moderation API: its verdict decides; down, the submit is refused with 503 and nothing is created", { timeout: 60_000 }, async () => {
    const { port, server } = await serve({
      MEDIAGATE_MODERATION: "openai",
      MEDIAGATE_MODERATION_URL: openai.url,
      MEDIAGATE_MODERATION_KEY: "sk-moderation"
    })
    expect(await submit(port, "please hate/threatening! this")).toEqual({ status: 400, body: rejected(["hate/threatening"]) })
    expect(JSON.parse(openai.requests.at(-1)!.body)).toEqual({ model: "omni-moderation-latest", input: "please hate/threatening! this" })
    // The API gets the prompt as the client sent it, look-alike letters and all (the fake
    // keeps a body's bytes, one latin1 character each).
    expect((await submit(port, "a scene full of g\u043er\u0435")).status).toBe(200)
    expect(JSON.parse(Buffer.from(openai.requests.at(-1)!.body, "latin1").toString("utf8"))).toEqual({
      model: "omni-moderation-latest",
      input: "a scene full of g\u043er\u0435"
    })
    // The API decides alone: the local list is not consulted.
    expect((await submit(port, "a battlefield full of gore")).status).toBe(200)

    openai.failNext({ status: 429, headers: { "retry-after": "1" }, body: { error: { message: "Rate limit reached" } } })
    expect(await submit(port, "a lighthouse")).toEqual({
      status: 503,
      body: { code: 503, msg: "content moderation is unavailable; nothing was created, try again later" }
    })
    openai.failNext({ status: 500, body: { error: { message: "boom" } } })
    expect((await submit(port, "a lighthouse")).status).toBe(503)
    expect(await tasksOf(port)).toHaveLength(2)
    await stop(server, "SIGTERM")
    // The operator's log says why, without the key.
    expect(server.output()).toContain("moderation: the moderation service answered 429: Rate limit reached; the submit was refused (failing closed)")
    expect(server.output()).not.toContain("sk-moderation")
  })

  it("failing open, a submit goes through while the API is down, and it is logged", { timeout: 60_000 }, async () => {
    const { port, server } = await serve({
      MEDIAGATE_MODERATION: "openai",
      MEDIAGATE_MODERATION_URL: "http://127.0.0.1:9",
      MEDIAGATE_MODERATION_KEY: "sk-moderation",
      MEDIAGATE_MODERATION_FAIL_OPEN: "true"
    })
    expect((await submit(port, "a lighthouse")).status).toBe(200)
    await stop(server, "SIGTERM")
    expect(server.output()).toMatch(/moderation: the moderation service could not be reached.*let through unchecked \(failing open\)/)
  })
})
