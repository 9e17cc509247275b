/**
 * SafeFetch against loopback servers: content types from the bytes, the size limit announced
 * and streamed, time limits on the TestClock, redirects (three followed, the fourth refused,
 * none to a non-public address or from https to http) and a host checked at every hop. The
 * refusals run with private addresses not allowed: `layerTest` routes the checked public
 * address of media.example.test to the loopback server.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { SafeFetch as Fetch } from "@mediagate/core"
import { Effect, Fiber, Layer, TestClock } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { refusedAddresses, refusedUrls } from "../../core/test/AddressCorpus.js"
import { SafeFetch } from "../src/index.js"
import { fixture, fixtures, mediaServer, scriptedResolver, until } from "./MediaServer.js"

const server = mediaServer()
beforeAll(server.start)
afterAll(server.stop)

const get = (url: string) => Effect.flatMap(Fetch.SafeFetch, (fetch) => fetch.get(url))

/** Private addresses allowed: the loopback server is reached by its address. */
const loopback = (options: SafeFetch.Options = {}) =>
  SafeFetch.layer({ allowPrivate: true, ...options }).pipe(Layer.provide(scriptedResolver([]).layer))

/** Private addresses refused; media.example.test resolves as `resolver` answers, connections go to loopback. */
const publicHost = (resolver: ReturnType<typeof scriptedResolver>) => {
  const dialed: Array<string> = []
  const layer = SafeFetch.layerTest({}, {
    route: (address) => {
      dialed.push(address)
      return "127.0.0.1"
    },
    ca: server.ca
  }).pipe(Layer.provide(resolver.layer))
  return { dialed, layer }
}
const publicAddress = "192.0.78.9"
const named = (path: string) => `http://media.example.test:${server.port()}${path}`

describe("SafeFetch", () => {
  it.effect.each(fixtures)("$file: the content type comes from the bytes, not the lying header", ({ contentType, file }) =>
    Effect.gen(function*() {
      const url = server.url(`/files/${file}`)
      const fetched = yield* get(url)
      expect(fetched).toEqual({ url, bytes: fixture(file), contentType })
      expect((yield* get(`${url}?chunked`)).contentType).toBe(contentType)
    }).pipe(Effect.provide(loopback())))

  it.effect("bytes of no known format are application/octet-stream", () =>
    Effect.gen(function*() {
      const fetched = yield* get(server.url("/bytes/300"))
      expect(fetched.contentType).toBe("application/octet-stream")
      expect(fetched.bytes.length).toBe(300)
    }).pipe(Effect.provide(loopback())))

  it.effect("a body of exactly the limit is fetched; an announced larger one fails before its body is read", () =>
    Effect.gen(function*() {
      expect((yield* get(server.url("/bytes/10000"))).bytes.length).toBe(10_000)
      // The server sends the headers and never a byte of the body: only the announcement can fail it.
      const announced = server.url("/announced/10001")
      expect(yield* Effect.flip(get(announced))).toEqual(
        new Fetch.SafeFetchError({ url: announced, reason: "TooLarge", message: `${announced}: larger than 10 kB` })
      )
    }).pipe(Effect.provide(loopback({ maxBytes: 10_000 }))))

  it.effect("a body without Content-Length is cut as soon as it passes the limit, and the connection closed", () =>
    Effect.gen(function*() {
      const endless = server.url("/endless")
      const error = yield* Effect.flip(get(endless))
      expect(error).toMatchObject({ reason: "TooLarge", message: `${endless}: larger than 10 kB` })
      yield* until(() => server.closedEarly.includes("/endless"))
    }).pipe(Effect.provide(loopback({ maxBytes: 10_000 }))))

  it.effect("the default limit is 50 MB", () =>
    Effect.gen(function*() {
      const announced = server.url("/announced/50000001")
      expect((yield* Effect.flip(get(announced))).message).toBe(`${announced}: larger than 50 MB`)
    }).pipe(Effect.provide(loopback())))

  it.effect("a server that never answers fails after the first-byte limit", () =>
    Effect.gen(function*() {
      const silent = server.url("/silent?first-byte")
      const fiber = yield* Effect.fork(Effect.flip(get(silent)))
      yield* until(() => server.received.includes("/silent?first-byte"))
      yield* TestClock.adjust("9 seconds")
      expect(fiber.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(fiber)).toEqual(
        new Fetch.SafeFetchError({ url: silent, reason: "Timeout", message: `${silent}: no answer within 10 s` })
      )
    }).pipe(Effect.provide(loopback())))

  it.effect("a body that stops coming fails after the total limit", () =>
    Effect.gen(function*() {
      const stalled = server.url("/stalled")
      const fiber = yield* Effect.fork(Effect.flip(get(stalled)))
      yield* until(() => server.received.includes("/stalled"))
      yield* TestClock.adjust("30 seconds")
      expect(fiber.unsafePoll()).toBeNull()
      yield* TestClock.adjust("30 seconds")
      expect(yield* Fiber.join(fiber)).toMatchObject({
        reason: "Timeout",
        message: `${stalled}: not received in full within 60 s`
      })
    }).pipe(Effect.provide(loopback({ firstByteTimeout: "2 minutes" }))))

  it.effect("an answer other than success says its status", () =>
    Effect.gen(function*() {
      const missing = server.url("/status/404")
      expect(yield* Effect.flip(get(missing))).toEqual(
        new Fetch.SafeFetchError({ url: missing, reason: "Status", message: `${missing}: HTTP 404` })
      )
      expect((yield* Effect.flip(get(server.url("/status/500")))).message).toMatch(/: HTTP 500$/)
      expect((yield* Effect.flip(get(server.url("/status/302")))).message).toMatch(/: HTTP 302 without a Location$/)
    }).pipe(Effect.provide(loopback())))

  it.effect("three redirects are followed, relative ones included; a fourth is refused and not followed", () =>
    Effect.gen(function*() {
      const three = yield* get(server.url("/redirect/3"))
      expect(three).toEqual({ url: server.url("/redirect/0"), bytes: fixture("image-64x48.png"), contentType: "image/png" })
      const before = server.received.length
      const four = server.url("/redirect/4")
      expect(yield* Effect.flip(get(four))).toEqual(
        new Fetch.SafeFetchError({ url: four, reason: "Redirect", message: `${four}: more than 3 redirects` })
      )
      expect(server.received.slice(before)).toEqual(["/redirect/4", "/redirect/3", "/redirect/2", "/redirect/1"])
    }).pipe(Effect.provide(loopback())))

  it.effect("the number of redirects is a setting", () =>
    Effect.gen(function*() {
      expect((yield* get(server.url("/redirect/1"))).contentType).toBe("image/png")
      expect((yield* Effect.flip(get(server.url("/redirect/2")))).message).toMatch(/: more than 1 redirects$/)
    }).pipe(Effect.provide(loopback({ maxRedirects: 1 }))))

  it.effect("a public host is fetched at the address that was checked, at every hop", () => {
    const resolver = scriptedResolver([publicAddress])
    const { dialed, layer } = publicHost(resolver)
    return Effect.gen(function*() {
      const fetched = yield* get(named("/redirect/2"))
      expect(fetched).toMatchObject({ url: named("/redirect/0"), contentType: "image/png" })
      // Resolved once per hop, and each connection went to that hop's checked address.
      expect(resolver.calls).toEqual(["media.example.test", "media.example.test", "media.example.test"])
      expect(dialed).toEqual([publicAddress, publicAddress, publicAddress])
    }).pipe(Effect.provide(layer))
  })

  it.effect.each([
    { to: "http://127.0.0.1:<port>/files/image-64x48.png", why: "127.0.0.1 is not a public address" },
    { to: "http://10.0.0.1/", why: "10.0.0.1 is not a public address" },
    { to: "http://[::ffff:127.0.0.1]/", why: "::ffff:7f00:1 is not a public address" },
    { to: "http://[::1]/", why: "::1 is not a public address" }
  ])("a redirect to $to is refused and not followed", ({ to, why }) => {
    const { dialed, layer } = publicHost(scriptedResolver([publicAddress]))
    return Effect.gen(function*() {
      const target = to.replace("<port>", String(server.port()))
      const url = named(`/to?location=${encodeURIComponent(target)}`)
      const before = server.received.length
      expect(yield* Effect.flip(get(url))).toEqual(
        new Fetch.SafeFetchError({ url, reason: "NotPublic", message: `${url}: redirect to ${target}: ${why}` })
      )
      expect(server.received.length).toBe(before + 1)
      expect(dialed).toEqual([publicAddress])
    }).pipe(Effect.provide(layer))
  })

  it.effect("a name answering a public address, then a private one (DNS rebinding) is refused at the redirect", () => {
    const resolver = scriptedResolver([publicAddress], ["127.0.0.1"])
    const { dialed, layer } = publicHost(resolver)
    return Effect.gen(function*() {
      const url = named(`/to?location=${encodeURIComponent("/files/image-64x48.png?rebinding")}`)
      const error = yield* Effect.flip(get(url))
      expect(error).toMatchObject({
        reason: "NotPublic",
        message: `${url}: redirect to ${named("/files/image-64x48.png?rebinding")}: ` +
          "media.example.test does not resolve to a public address"
      })
      // The internal answer is not told to the client: it would map the network behind us.
      expect(error.message).not.toContain("127.0.0.1")
      expect(resolver.calls).toEqual(["media.example.test", "media.example.test"])
      expect(dialed).toEqual([publicAddress])
      expect(server.received).not.toContain("/files/image-64x48.png?rebinding")
    }).pipe(Effect.provide(layer))
  })

  it.effect("a name answering a public and a private address at once is refused, and nothing is sent", () => {
    const { dialed, layer } = publicHost(scriptedResolver([publicAddress, "10.0.0.1"]))
    return Effect.gen(function*() {
      const url = named("/files/image-64x48.png?mixed")
      const error = yield* Effect.flip(get(url))
      expect(error).toMatchObject({
        reason: "NotPublic",
        message: `${url}: media.example.test does not resolve to a public address`
      })
      expect(error.message).not.toContain("10.0.0.1")
      expect(error.message).not.toContain(publicAddress)
      expect(dialed).toEqual([])
      expect(server.received).not.toContain("/files/image-64x48.png?mixed")
    }).pipe(Effect.provide(layer))
  })

  describe("the whole address corpus (packages/core/test/AddressCorpus.ts)", () => {
    it.effect.each(refusedAddresses)("a name resolving to %s is refused, and nothing is dialed", (address) => {
      const { dialed, layer } = publicHost(scriptedResolver([publicAddress, address]))
      return Effect.gen(function*() {
        const url = named("/files/image-64x48.png?corpus")
        const error = yield* Effect.flip(get(url))
        expect(error).toEqual(
          new Fetch.SafeFetchError({ url, reason: "NotPublic", message: `${url}: media.example.test does not resolve to a public address` })
        )
        // No answer of the resolver is named, in any spelling.
        expect(error.message).not.toContain(address)
        expect(error.message).not.toContain(publicAddress)
        expect(dialed).toEqual([])
      }).pipe(Effect.provide(layer))
    })

    it.effect.each(refusedAddresses)("a redirect to a name that resolves to %s (DNS rebinding) is refused and not followed", (address) => {
      const resolver = scriptedResolver([publicAddress], [address])
      const { dialed, layer } = publicHost(resolver)
      return Effect.gen(function*() {
        const url = named(`/to?location=${encodeURIComponent("/files/image-64x48.png?rebound")}`)
        const error = yield* Effect.flip(get(url))
        expect(error).toMatchObject({ reason: "NotPublic" })
        expect(error.message).toMatch(/: media\.example\.test does not resolve to a public address$/)
        expect(error.message).not.toContain(address)
        expect(resolver.calls).toEqual(["media.example.test", "media.example.test"])
        expect(dialed).toEqual([publicAddress])
      }).pipe(Effect.provide(layer))
    })

    it.effect.each(refusedUrls)("%s is refused before any lookup, whatever the resolver would answer", (url) => {
      const resolver = scriptedResolver([publicAddress])
      const { dialed, layer } = publicHost(resolver)
      return Effect.gen(function*() {
        expect(yield* Effect.flip(get(url))).toMatchObject({ reason: "NotPublic" })
        expect(resolver.calls).toEqual([])
        expect(dialed).toEqual([])
      }).pipe(Effect.provide(layer))
    })
  })

  it.effect("private addresses are refused unless allowed, like Outbound's", () =>
    Effect.gen(function*() {
      const url = server.url("/files/image-64x48.png?literal")
      const refused = yield* Effect.flip(get(url).pipe(Effect.provide(SafeFetch.layer().pipe(Layer.provide(scriptedResolver([]).layer)))))
      expect(refused).toMatchObject({ reason: "NotPublic", message: `${url}: 127.0.0.1 is not a public address` })
      expect(server.received).not.toContain("/files/image-64x48.png?literal")
      expect((yield* get(url).pipe(Effect.provide(loopback()))).contentType).toBe("image/png")
    }))

  it.effect("https is fetched with its certificate checked for the name; a redirect from https to http is refused", () => {
    const { dialed, layer } = publicHost(scriptedResolver([publicAddress]))
    return Effect.gen(function*() {
      const tls = (path: string) => `https://media.example.test:${server.tlsPort()}${path}`
      expect((yield* get(tls("/files/video-3s.mp4"))).contentType).toBe("video/mp4")
      const plain = named("/files/image-64x48.png?downgrade")
      const url = tls(`/to?location=${encodeURIComponent(plain)}`)
      expect(yield* Effect.flip(get(url))).toEqual(
        new Fetch.SafeFetchError({ url, reason: "Redirect", message: `${url}: redirect from https to http (${plain}) refused` })
      )
      expect(server.received).not.toContain("/files/image-64x48.png?downgrade")
      expect(dialed).toEqual([publicAddress, publicAddress])
    }).pipe(Effect.provide(layer))
  })

  it.effect("bad URLs and failed connections say why", () =>
    Effect.gen(function*() {
      expect(yield* Effect.flip(get("ftp://example.com/a.png"))).toMatchObject({
        reason: "InvalidUrl",
        message: "ftp://example.com/a.png: not an http or https URL"
      })
      expect((yield* Effect.flip(get("not a url"))).message).toBe("not a url: not an absolute URL")
      const nowhere = "http://nowhere.example.test/a.png"
      expect(yield* Effect.flip(get(nowhere))).toMatchObject({
        reason: "Unresolvable",
        message: `${nowhere}: nowhere.example.test has no address`
      })
      // A port nothing listens on: take a fresh one and close it.
      const spare = Http.createServer()
      yield* Effect.promise(() => new Promise<void>((resolve) => spare.listen(0, "127.0.0.1", resolve)))
      const closed = `http://127.0.0.1:${(spare.address() as AddressInfo).port}/a.png`
      yield* Effect.promise(() => new Promise((resolve) => spare.close(resolve)))
      const refused = yield* Effect.flip(get(closed))
      expect(refused.reason).toBe("Failed")
      expect(refused.message).toMatch(new RegExp(`^${closed}: request failed: connect ECONNREFUSED`))
      const bad = server.url("/to?location=ftp%3A%2F%2Fexample.com%2Fa.png")
      expect((yield* Effect.flip(get(bad))).message).toBe(`${bad}: redirect to ftp://example.com/a.png: not an http or https URL`)
    }).pipe(Effect.provide(loopback())))
})
