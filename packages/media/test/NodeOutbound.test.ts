/**
 * Outbound requests against real receivers on loopback, with a resolver that answers what
 * each test needs: every resolved address is checked, the connection goes to the checked
 * one, redirects are answers, and only the given headers go out. Time limits run on the
 * TestClock.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Outbound } from "@mediagate/core"
import { Effect, Either, Fiber, Layer, TestClock } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { hostname } from "node:os"
import { refusedAddresses, refusedUrls } from "../../core/test/AddressCorpus.js"
import { NodeOutbound, NodeResolver } from "../src/index.js"

type Received = {
  readonly path: string
  readonly headerNames: ReadonlyArray<string>
  readonly host: string
  readonly body: string
  /** The client's end of the connection: the same for requests on one kept connection. */
  readonly remotePort: number
}

type Answer = { readonly status: number; readonly location?: string }

/** A receiver on loopback that records every request and answers per path (status 0: never answers). */
const receiver = (answer: (path: string) => Answer) => {
  const received: Array<Received> = []
  const server = Http.createServer((request, response) => {
    let body = ""
    request.on("data", (chunk) => (body += chunk))
    request.on("end", () => {
      const path = request.url ?? "/"
      const headerNames = request.rawHeaders.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase())
      received.push({ path, headerNames, host: request.headers.host ?? "", body, remotePort: request.socket.remotePort ?? 0 })
      const { location, status } = answer(path)
      if (status === 0) return
      response.writeHead(status, location === undefined ? {} : { location }).end()
    })
  })
  const port = () => (server.address() as AddressInfo).port
  return { received, server, port, url: (path: string) => `http://127.0.0.1:${port()}${path}` }
}

const elsewhere = receiver(() => ({ status: 204 }))
const main = receiver((path): Answer =>
  path === "/moved"
    ? { status: 302, location: elsewhere.url("/stolen") }
    : path === "/silent"
    ? { status: 0 }
    : path === "/created"
    ? { status: 201 }
    : { status: 204 }
)
const listen = (server: Http.Server) => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
const close = (server: Http.Server) => {
  server.closeAllConnections()
  return new Promise<void>((resolve) => server.close(() => resolve()))
}
beforeAll(async () => {
  await listen(main.server)
  await listen(elsewhere.server)
})
afterAll(async () => {
  await close(main.server)
  await close(elsewhere.server)
})

/** A resolver answering `answers[n]` on its n-th call (the last one repeats), counting calls. */
const scriptedResolver = (...answers: ReadonlyArray<ReadonlyArray<string>>) => {
  const calls: Array<string> = []
  const layer = Layer.succeed(Outbound.Resolver, {
    resolve: (hostname) =>
      Effect.sync(() => {
        calls.push(hostname)
        return answers[Math.min(calls.length, answers.length) - 1]!
      })
  })
  return { calls, layer }
}

const post = (url: string, headers: Record<string, string> = {}) =>
  Effect.flatMap(Outbound.Outbound, (outbound) => outbound.post({ url, headers, body: "{}", timeout: "5 seconds" }))

const outbound = (options: NodeOutbound.Options, resolver: Layer.Layer<Outbound.Resolver>) =>
  NodeOutbound.layer(options).pipe(Layer.provide(resolver))
const outbound_ = outbound

/** Lets real I/O happen: event-loop turns, not timed sleeps. */
const until = (done: () => boolean) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 2_000 && !done(); turn++) {
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    }
    if (!done()) return yield* Effect.dieMessage("condition not reached")
  })

const hits = (path: string) => main.received.filter((r) => r.path === path)

describe("NodeOutbound", () => {
  it.effect("sends only the headers it is given, plus host and content-length", () =>
    Effect.gen(function*() {
      const answer = yield* post(main.url("/headers"), { "content-type": "application/json", "user-agent": "ua/1", "x-one": "1" })
      expect(answer).toMatchObject({ status: 204 })
      const [request] = hits("/headers")
      expect(new Set(request!.headerNames)).toEqual(new Set(["content-type", "user-agent", "x-one", "host", "content-length"]))
      expect(request!.body).toBe("{}")
    }).pipe(Effect.provide(outbound({ allowPrivate: true }, scriptedResolver([]).layer))))

  it.effect("answers any status as it is", () =>
    Effect.gen(function*() {
      expect(yield* post(main.url("/created"))).toMatchObject({ status: 201 })
    }).pipe(Effect.provide(outbound({ allowPrivate: true }, scriptedResolver([]).layer))))

  it.effect("a name resolving to a public address and a private one is refused, and nothing is sent", () => {
    const resolver = scriptedResolver(["192.0.78.9", "127.0.0.1"])
    return Effect.gen(function*() {
      const error = yield* Effect.flip(post(`http://hooks.example.test:${main.port()}/mixed`))
      expect(error).toMatchObject({
        _tag: "OutboundError",
        reason: "NotPublic",
        message: "hooks.example.test does not resolve to a public address"
      })
      // Neither answer is told: the refusal must not map the network behind us.
      expect(error.message).not.toMatch(/127\.0\.0\.1|192\.0\.78\.9/)
      expect(resolver.calls).toEqual(["hooks.example.test"])
      expect(hits("/mixed")).toEqual([])
    }).pipe(Effect.provide(outbound({}, resolver.layer)))
  })

  it.effect.each([
    [["127.0.0.1", "192.0.78.9"], "127.0.0.1"],
    [["2606:4700::1111", "::1"], "::1"],
    [["2606:4700::1111", "64:ff9b::7f00:1"], "64:ff9b::7f00:1"],
    [["10.0.0.1"], "10.0.0.1"]
  ] as const)("answers %j: refused for %s, which the message does not name", ([answers, refused]) =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(post(`http://hooks.example.test:${main.port()}/mixed`))
      expect(error.message).toBe("hooks.example.test does not resolve to a public address")
      for (const answer of [...answers, refused]) expect(error.message).not.toContain(answer)
      expect(hits("/mixed")).toEqual([])
    }).pipe(Effect.provide(outbound({}, scriptedResolver(answers).layer))))

  it.effect("the connection goes to the address that was checked: the name is resolved once", () => {
    // A second lookup would answer an address nothing listens on; the request still reaches loopback.
    const resolver = scriptedResolver(["127.0.0.1"], ["192.0.2.1"])
    return Effect.gen(function*() {
      const answer = yield* post(`http://hooks.example.test:${main.port()}/pinned`)
      expect(answer.status).toBe(204)
      const [request] = hits("/pinned")
      expect(request!.host).toBe(`hooks.example.test:${main.port()}`)
      expect(resolver.calls).toEqual(["hooks.example.test"])
    }).pipe(Effect.provide(outbound({ allowPrivate: true }, resolver.layer)))
  })

  it.effect("a literal non-public address is refused without asking the resolver", () => {
    const resolver = scriptedResolver(["192.0.78.9"])
    return Effect.gen(function*() {
      const error = yield* Effect.flip(post(main.url("/literal")))
      expect(error).toMatchObject({ reason: "NotPublic", message: "127.0.0.1 is not a public address" })
      const v6 = yield* Effect.flip(post(`http://[::ffff:127.0.0.1]:${main.port()}/literal`))
      expect(v6).toMatchObject({ reason: "NotPublic", message: "::ffff:7f00:1 is not a public address" })
      expect(resolver.calls).toEqual([])
      expect(hits("/literal")).toEqual([])
    }).pipe(Effect.provide(outbound({}, resolver.layer)))
  })

  it.effect("a redirect is an answer: it is never followed", () =>
    Effect.gen(function*() {
      expect(yield* post(main.url("/moved"))).toMatchObject({ status: 302 })
      expect(hits("/moved").length).toBe(1)
      expect(elsewhere.received).toEqual([])
    }).pipe(Effect.provide(outbound({ allowPrivate: true }, scriptedResolver([]).layer))))

  it.effect("no answer within the time limit fails with Timeout", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.fork(Effect.either(post(main.url("/silent"))))
      yield* until(() => hits("/silent").length === 1)
      yield* TestClock.adjust("5 seconds")
      const outcome = yield* Fiber.join(fiber)
      expect(outcome).toEqual(Either.left(new Outbound.OutboundError({ reason: "Timeout", message: "no answer within 5s" })))
    }).pipe(Effect.provide(outbound({ allowPrivate: true }, scriptedResolver([]).layer))))

  it.effect("a name without addresses, a failed connection and a bad URL say why", () =>
    Effect.gen(function*() {
      expect(yield* Effect.flip(post("http://nowhere.example.test/x"))).toMatchObject({
        reason: "Unresolvable",
        message: "nowhere.example.test has no address"
      })
      // A port nothing listens on: the closed elsewhere port is not known, so take a fresh one and close it.
      const spare = Http.createServer()
      yield* Effect.promise(() => listen(spare))
      const port = (spare.address() as AddressInfo).port
      yield* Effect.promise(() => close(spare))
      const refused = yield* Effect.flip(post(`http://127.0.0.1:${port}/x`))
      expect(refused.reason).toBe("Failed")
      expect(refused.message).toMatch(/^request failed: connect ECONNREFUSED/)
      expect(yield* Effect.flip(post("ftp://example.com/x"))).toMatchObject({ reason: "InvalidUrl" })
      expect(yield* Effect.flip(post("not a url"))).toMatchObject({ reason: "InvalidUrl" })
      expect(yield* Effect.flip(post("https://user:pw@example.com/x"))).toMatchObject({ reason: "InvalidUrl" })
    }).pipe(Effect.provide(outbound({ allowPrivate: true }, scriptedResolver([]).layer))))

  it.effect("with the system resolver, the machine's own name (in /etc/hosts) is refused for the address it resolves to, without naming it", () =>
    Effect.gen(function*() {
      const name = hostname()
      const addresses = yield* NodeResolver.resolve(name)
      expect(addresses.length).toBeGreaterThan(0)
      const error = yield* Effect.flip(post(`http://${name}:${main.port()}/hosts-file`))
      expect(error.reason).toBe("NotPublic")
      expect(error.message).toBe(`${name} does not resolve to a public address`)
      for (const address of addresses) expect(error.message).not.toContain(address)
      expect(hits("/hosts-file")).toEqual([])
    }).pipe(Effect.provide(outbound({}, NodeResolver.layer))))

  it.effect.each(["localhost", "LOCALHOST.", "api.localhost"])("%s is refused by its name, whatever a resolver would answer", (name) => {
    const resolver = scriptedResolver(["192.0.78.9"])
    return Effect.gen(function*() {
      const error = yield* Effect.flip(post(`http://${name}:${main.port()}/named-localhost`))
      expect(error).toMatchObject({ reason: "NotPublic", message: `${name.toLowerCase()} is not a public host` })
      expect(resolver.calls).toEqual([])
      expect(hits("/named-localhost")).toEqual([])
    }).pipe(Effect.provide(outbound({}, resolver.layer)))
  })

  describe("the whole address corpus (packages/core/test/AddressCorpus.ts)", () => {
    it.effect.each(refusedAddresses)("a name resolving to %s is refused, and nothing is sent", (address) => {
      const resolver = scriptedResolver(["192.0.78.9", address])
      return Effect.gen(function*() {
        const error = yield* Effect.flip(post(`http://hooks.example.test:${main.port()}/corpus`))
        expect(error).toMatchObject({ reason: "NotPublic", message: "hooks.example.test does not resolve to a public address" })
        expect(error.message).not.toContain(address)
        expect(resolver.calls).toEqual(["hooks.example.test"])
        expect(hits("/corpus")).toEqual([])
      }).pipe(Effect.provide(outbound({}, resolver.layer)))
    })

    it.effect.each(refusedUrls)("%s is refused before any lookup, whatever the resolver would answer", (url) => {
      const resolver = scriptedResolver(["192.0.78.9"])
      return Effect.gen(function*() {
        const error = yield* Effect.flip(post(url))
        expect(error.reason).toBe("NotPublic")
        expect(resolver.calls).toEqual([])
      }).pipe(Effect.provide(outbound({}, resolver.layer)))
    })
  })

  it.effect("a connection is kept and reused for the next request to the same host and address, and closed with the layer", () =>
    Effect.gen(function*() {
      const closed: Array<number> = []
      main.server.on("connection", (socket) => socket.on("close", () => closed.push(socket.remotePort ?? 0)))
      yield* Effect.scoped(
        Effect.gen(function*() {
          const outbound = yield* Layer.build(outbound_({ allowPrivate: true }, scriptedResolver([]).layer))
          const send = post(main.url("/kept")).pipe(Effect.provide(outbound))
          expect(yield* send).toMatchObject({ status: 204 })
          expect(yield* send).toMatchObject({ status: 204 })
          const [first, second] = hits("/kept")
          expect(second!.remotePort).toBe(first!.remotePort)
          expect(closed).not.toContain(first!.remotePort)
        })
      )
      const port = hits("/kept")[0]!.remotePort
      yield* until(() => closed.includes(port))
    }))

  it.effect("a kept connection is never used for a request whose own check chose another address", () => {
    // Same name and port; the second answer is another loopback address, where nothing listens.
    const resolver = scriptedResolver(["127.0.0.1"], ["127.0.0.2"])
    return Effect.gen(function*() {
      expect(yield* post(`http://hooks.example.test:${main.port()}/moved-host`)).toMatchObject({ status: 204 })
      const error = yield* Effect.flip(post(`http://hooks.example.test:${main.port()}/moved-host`))
      expect(error.message).toBe(`request failed: connect ECONNREFUSED 127.0.0.2:${main.port()}`)
      expect(hits("/moved-host").length).toBe(1)
    }).pipe(Effect.provide(outbound({ allowPrivate: true }, resolver.layer)))
  })

  it.effect("a kept connection the receiver closes as it is reused: the request goes again on a new connection", () => {
    // Answers the first request of each connection; a second one on the same connection is cut off unanswered.
    const requests: Array<number> = []
    const server = Http.createServer((request, response) => {
      const port = request.socket.remotePort ?? 0
      const again = requests.includes(port)
      requests.push(port)
      if (again) return request.socket.destroy()
      request.resume()
      request.on("end", () => response.writeHead(204).end())
    })
    return Effect.gen(function*() {
      yield* Effect.acquireRelease(Effect.promise(() => listen(server)), () => Effect.promise(() => close(server)))
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/cut`
      expect(yield* post(url)).toMatchObject({ status: 204 })
      expect(yield* post(url)).toMatchObject({ status: 204 })
      expect(requests.length).toBe(3)
      expect(requests[1]).toBe(requests[0])
      expect(requests[2]).not.toBe(requests[0])
    }).pipe(Effect.provide(outbound({ allowPrivate: true }, scriptedResolver([]).layer)), Effect.scoped)
  })

  it.effect("idle connections beyond the limit are closed: two at once, one kept", () =>
    Effect.gen(function*() {
      const closed: Array<number> = []
      main.server.on("connection", (socket) => socket.on("close", () => closed.push(socket.remotePort ?? 0)))
      const outbound = yield* Layer.build(outbound_({ allowPrivate: true, idleConnections: 1 }, scriptedResolver([]).layer))
      const send = post(main.url("/limited")).pipe(Effect.provide(outbound))
      // Two at once need two connections; when both are idle, only one stays open.
      expect((yield* Effect.all([send, send], { concurrency: 2 })).map((answer) => answer.status)).toEqual([204, 204])
      const ports = hits("/limited").map((r) => r.remotePort)
      expect(new Set(ports).size).toBe(2)
      yield* until(() => ports.filter((port) => closed.includes(port)).length === 1)
      // The kept one serves the next request.
      expect(yield* send).toMatchObject({ status: 204 })
      const kept = ports.find((port) => !closed.includes(port))
      expect(hits("/limited")[2]!.remotePort).toBe(kept)
    }).pipe(Effect.scoped))
})
