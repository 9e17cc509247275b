import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { HeldRequests } from "../src/index.js"

describe("HeldRequests", () => {
  it("the events stream and the query with wait are held; other requests are not", () => {
    const id = "0190c8a4-0000-7000-8000-000000000000"
    expect(HeldRequests.isHeld("GET", `/api/v1/task/${id}/events`)).toBe(true)
    expect(HeldRequests.isHeld("GET", `/api/v1/task/${id}/events/`)).toBe(true)
    expect(HeldRequests.isHeld("GET", `/api/v1/task/${id}?wait=60`)).toBe(true)
    expect(HeldRequests.isHeld("HEAD", `/api/v1/task/${id}/?x=1&wait=5`)).toBe(true)
    expect(HeldRequests.isHeld("GET", `/api/v1/task/${id}`)).toBe(false)
    expect(HeldRequests.isHeld("GET", `/api/v1/task/${id}?waiting=1`)).toBe(false)
    expect(HeldRequests.isHeld("POST", `/api/v1/task/${id}/events`)).toBe(false)
    expect(HeldRequests.isHeld("GET", "/api/v1/tasks?wait=5")).toBe(false)
  })

  it("caps per key and in total; a place comes back when its scope closes, whatever the exit", () =>
    Effect.runPromise(Effect.gen(function*() {
      const held = HeldRequests.make({ perKey: 2, total: 3 })
      const scopes = yield* Effect.all(Array.from({ length: 3 }, () => Scope.make()))
      expect(yield* HeldRequests.hold(held, "a").pipe(Scope.extend(scopes[0]!))).toBeUndefined()
      expect(yield* HeldRequests.hold(held, "a").pipe(Scope.extend(scopes[1]!))).toBeUndefined()
      expect(yield* held.acquire("a")).toEqual({ _tag: "Refused", cap: "key" })
      expect(yield* HeldRequests.hold(held, "b").pipe(Scope.extend(scopes[2]!))).toBeUndefined()
      expect(yield* held.acquire("c")).toEqual({ _tag: "Refused", cap: "total" })
      expect([held.total(), held.keys()]).toEqual([3, 2])
      // An answer sent, and a client gone away (interrupted): both give their place back.
      yield* Scope.close(scopes[0]!, Exit.void)
      yield* Scope.close(scopes[2]!, Exit.interrupt(undefined as never))
      expect([held.total(), held.keys()]).toEqual([1, 1])
      expect((yield* held.acquire("c"))._tag).toBe("Held")
    })))
})
