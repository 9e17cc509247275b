/**
 * A body read from each origin a request comes as: node:http's IncomingMessage (a real server
 * on loopback), a web Request, and any other request through its stream. Each keeps a body up
 * to its limit, counts and drops what is past it, stops past the drain limit, and fails as
 * Unreadable when the body breaks off.
 */
import type { HttpServerRequest } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Either, Stream } from "effect"
import * as Http from "node:http"
import { connect } from "node:net"
import type { AddressInfo } from "node:net"
import * as RequestBody from "../src/RequestBody.js"

const limits: RequestBody.Limits = { keepBytes: 10, drainBytes: 25 }
const bytes = (text: string) => new TextEncoder().encode(text)
const text = (body: RequestBody.Body) => new TextDecoder().decode(body.bytes)

/** What `read` looks at: the request's origin (and, for another origin, its stream). */
const requestOf = (source: unknown, stream: Stream.Stream<Uint8Array> = Stream.empty) =>
  ({ source, stream }) as unknown as HttpServerRequest.HttpServerRequest

/**
 * A loopback server whose one request's body is read with `limits`; the client writes `pieces`
 * (a piece at a time) and, when `abort`, goes away before ending the body. Gives what the read
 * gave, and whether the request was destroyed under it.
 */
const overNode = (pieces: ReadonlyArray<string>, options: { readonly abort?: boolean } = {}) =>
  Effect.async<{ readonly read: Either.Either<RequestBody.Body, RequestBody.Unreadable>; readonly destroyed: boolean }>((resume) => {
    const server = Http.createServer((incoming, response) => {
      Effect.runPromise(Effect.either(RequestBody.read(requestOf(incoming), limits))).then((read) => {
        const destroyed = incoming.destroyed && !incoming.complete
        response.end()
        server.close()
        resume(Effect.succeed({ read, destroyed }))
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      const request = Http.request({ host: "127.0.0.1", port, method: "POST", headers: { "transfer-encoding": "chunked" } })
      request.on("error", () => {})
      const write = (index: number): void => {
        if (index === pieces.length) {
          if (options.abort === true) request.destroy()
          else request.end()
          return
        }
        request.write(pieces[index], () => setImmediate(() => write(index + 1)))
      }
      write(0)
    })
  })

const webRequest = (pieces: ReadonlyArray<string>, failAfter = false) =>
  new Request("http://127.0.0.1/", {
    method: "POST",
    body: new ReadableStream<Uint8Array>({
      start(controller) {
        for (const piece of pieces) controller.enqueue(bytes(piece))
        if (failAfter) controller.error(new Error("the client went away"))
        else controller.close()
      }
    }),
    // A body stream on a Request needs this in node's fetch.
    ...({ duplex: "half" } as object)
  })

describe("RequestBody.read", () => {
  describe("node:http's IncomingMessage", () => {
    it.effect("a body in pieces under the limit is kept whole", () =>
      Effect.gen(function*() {
        const { read } = yield* overNode(["{\"a\":", "1}"])
        expect(Either.map(read, text)).toEqual(Either.right("{\"a\":1}"))
      }))

    it.effect("past keepBytes it is counted, not kept, and read to its end", () =>
      Effect.gen(function*() {
        const { destroyed, read } = yield* overNode(["0123456789", "abcdef"])
        const body = Either.getOrThrow(read)
        expect([body.size, body.bytes.length, destroyed]).toEqual([16, 0, false])
      }))

    it.effect("past drainBytes the reading stops and the request is destroyed", () =>
      Effect.gen(function*() {
        const { destroyed, read } = yield* overNode(["0123456789", "0123456789", "0123456789", "0123456789"])
        const body = Either.getOrThrow(read)
        expect(body.size).toBe(30)
        expect(destroyed).toBe(true)
      }))

    it.effect("a client that goes away before the end of its body: Unreadable", () =>
      Effect.gen(function*() {
        const { read } = yield* overNode(["{\"a\":"], { abort: true })
        expect(Either.isLeft(read) && read.left._tag).toBe("Unreadable")
      }))
  })

  describe("a web Request", () => {
    it.effect("a body in pieces under the limit is kept whole; no body is empty", () =>
      Effect.gen(function*() {
        expect(text(yield* RequestBody.read(requestOf(webRequest(["{\"a\":", "1}"])), limits))).toBe("{\"a\":1}")
        expect((yield* RequestBody.read(requestOf(new Request("http://127.0.0.1/")), limits)).size).toBe(0)
      }))

    it.effect("past keepBytes it is counted, not kept; past drainBytes the reading stops", () =>
      Effect.gen(function*() {
        const over = yield* RequestBody.read(requestOf(webRequest(["0123456789", "abcdef"])), limits)
        expect([over.size, over.bytes.length]).toEqual([16, 0])
        const drained = yield* RequestBody.read(requestOf(webRequest(["0123456789", "0123456789", "0123456789", "0123456789"])), limits)
        expect(drained.size).toBe(30)
      }))

    it.effect("a stream that fails: Unreadable", () =>
      Effect.gen(function*() {
        const read = yield* Effect.either(RequestBody.read(requestOf(webRequest(["{\"a\":"], true)), limits))
        expect(Either.isLeft(read) && read.left._tag).toBe("Unreadable")
      }))
  })

  describe("any other request, through its stream", () => {
    it.effect("kept under the limit, counted past it, stopped past drainBytes; a failing stream is Unreadable", () =>
      Effect.gen(function*() {
        const of = (pieces: ReadonlyArray<string>) => Stream.fromChunk(Chunk.fromIterable(pieces.map(bytes)))
        expect(text(yield* RequestBody.read(requestOf({}, of(["{\"a\":", "1}"])), limits))).toBe("{\"a\":1}")
        expect((yield* RequestBody.read(requestOf({}, of(["0123456789", "abcdef"])), limits)).size).toBe(16)
        let pulled = 0
        const counted = Stream.tap(of(Array.from({ length: 8 }, () => "0123456789")), () => Effect.sync(() => pulled++))
        expect((yield* RequestBody.read(requestOf({}, Stream.rechunk(counted, 1)), limits)).size).toBe(30)
        // The fourth piece is pulled and not taken; the other four are never read.
        expect(pulled).toBe(4)
        const failing = Stream.concat(of(["{"]), Stream.fail("gone" as never))
        const read = yield* Effect.either(RequestBody.read(requestOf({}, failing), limits))
        expect(Either.isLeft(read) && read.left._tag).toBe("Unreadable")
      }))
  })
})

/**
 * `arrived` as a handler sees it: in a microtask after node:http's `request` event, as a
 * fiber the platform starts there first runs. The client sends `head` (the headers and as
 * much of the body as it has) in one write, and `rest` only once the server has looked.
 */
const arrivedOverNode = (head: string, options: { readonly pause?: boolean; readonly rest?: string } = {}) =>
  Effect.async<boolean>((resume) => {
    const server = Http.createServer((incoming, response) => {
      if (options.pause === true) incoming.pause()
      void Promise.resolve().then(() => {
        const seen = RequestBody.arrived({ source: incoming, headers: incoming.headers } as unknown as HttpServerRequest.HttpServerRequest)
        incoming.resume()
        incoming.on("end", () => response.end())
        client.write(options.rest ?? "")
        resume(Effect.succeed(seen))
      })
    })
    let client: ReturnType<typeof connect>
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      client = connect(port, "127.0.0.1", () => client.write(head))
      client.on("data", () => {
        client.end()
        server.close()
      })
    })
  })

describe("RequestBody.arrived", () => {
  const post = (headers: string, body: string) => `POST / HTTP/1.1\r\nHost: x\r\n${headers}\r\n\r\n${body}`

  it.effect("a body whose Content-Length bytes came with the headers has arrived; an empty one too", () =>
    Effect.gen(function*() {
      expect(yield* arrivedOverNode(post("Content-Length: 7", "{\"a\":1}"))).toBe(true)
      expect(yield* arrivedOverNode(post("Content-Length: 0", ""))).toBe(true)
    }))

  it.effect("a body with bytes still to come, by length or chunked, has not; nor one held paused", () =>
    Effect.gen(function*() {
      expect(yield* arrivedOverNode(post("Content-Length: 7", "{\"a\""), { rest: ":1}" })).toBe(false)
      expect(yield* arrivedOverNode(post("Transfer-Encoding: chunked", "7\r\n{\"a\":1}\r\n"), { rest: "0\r\n\r\n" })).toBe(false)
      expect(yield* arrivedOverNode(post("Content-Length: 7", "{\"a\":1}"), { pause: true })).toBe(false)
    }))

  it("a web Request or another origin is taken as still arriving", () => {
    expect(RequestBody.arrived({ source: webRequest(["{}"]), headers: { "content-length": "2" } } as unknown as HttpServerRequest.HttpServerRequest)).toBe(false)
    expect(RequestBody.arrived({ source: {}, headers: {} } as unknown as HttpServerRequest.HttpServerRequest)).toBe(false)
  })
})
