/**
 * A JSON body read by the handlers (`Handlers.readJsonBody`) over a real node:http request on
 * loopback, its fiber started in the `request` event as the platform's server starts it: a
 * body that came whole with its headers is read with no fiber forked (no deadline race);
 * one still arriving is read under the body's deadline, which forks its reading and the
 * deadline's race.
 */
import { describe, expect, it } from "@effect/vitest"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect, Supervisor } from "effect"
import type { Context, Exit, Fiber, Option } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { connect } from "node:net"
import * as Handlers from "../src/Handlers.js"

/** Counts the fibers started under it. */
class Forks extends Supervisor.AbstractSupervisor<void> {
  count = 0
  override get value() {
    return Effect.void
  }
  override onStart<A, E, R>(_context: Context.Context<R>, _effect: Effect.Effect<A, E, R>, _parent: Option.Option<Fiber.RuntimeFiber<any, any>>, _fiber: Fiber.RuntimeFiber<A, E>) {
    this.count++
  }
  override onEnd<A, E>(_value: Exit.Exit<A, E>, _fiber: Fiber.RuntimeFiber<A, E>) {}
}

/**
 * The body a server's one request gave `readJsonBody`, and the fibers its reading forked. The
 * client writes `head` (headers and as much of the body as it has) at once, and `rest` 20 ms
 * later.
 */
const readOverNode = (head: string, rest = "") =>
  Effect.async<{ readonly body: unknown; readonly forks: number }>((resume) => {
    const server = Http.createServer((incoming, response) => {
      const forks = new Forks()
      const request = { source: incoming, headers: incoming.headers } as unknown as HttpServerRequest.HttpServerRequest
      // Started here, in the `request` event, as the platform's server starts a request's fiber.
      Effect.runFork(Effect.supervised(Handlers.readJsonBody(request), forks)).addObserver((exit) => {
        response.end()
        server.close()
        resume(Effect.succeed({ body: exit._tag === "Success" ? exit.value : exit.cause, forks: forks.count }))
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      const client = connect(port, "127.0.0.1", () => {
        client.write(head)
        if (rest !== "") setTimeout(() => client.write(rest), 20)
      })
      client.on("data", () => client.end())
      client.on("error", () => {})
    })
  })

const post = (body: string) => `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`

describe("Handlers.readJsonBody over node:http", () => {
  it.effect("a body that came with its headers is read with no fiber forked", () =>
    Effect.gen(function*() {
      const body = "{\"prompt\":\"a lighthouse\"}"
      expect(yield* readOverNode(post(body) + body)).toEqual({ body: { prompt: "a lighthouse" }, forks: 0 })
    }))

  it.effect("a body still arriving is read under the deadline: its reading and the race are forked", () =>
    Effect.gen(function*() {
      const body = "{\"prompt\":\"a lighthouse\"}"
      const read = yield* readOverNode(post(body) + body.slice(0, 10), body.slice(10))
      expect(read.body).toEqual({ prompt: "a lighthouse" })
      expect(read.forks).toBeGreaterThan(0)
    }))
})
