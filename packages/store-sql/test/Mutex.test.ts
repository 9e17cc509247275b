import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import * as Mutex from "../src/internal/Mutex.js"

describe("Mutex", () => {
  it.effect("one holder at a time, the waiters served in the order they came", () =>
    Effect.gen(function*() {
      const lock = Mutex.make()
      const order: Array<number> = []
      const gate = yield* Deferred.make<void>()
      const first = yield* Effect.fork(lock.withLock(Effect.zipRight(Deferred.await(gate), Effect.sync(() => order.push(0)))))
      yield* Effect.yieldNow()
      const rest = yield* Effect.forEach([1, 2, 3], (n) => Effect.fork(lock.withLock(Effect.sync(() => order.push(n)))))
      yield* Effect.yieldNow()
      expect(order).toEqual([])
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(first)
      yield* Effect.forEach(rest, Fiber.join)
      expect(order).toEqual([0, 1, 2, 3])
    }))

  it.effect("a waiter interrupted in line leaves it; the lock goes to the next", () =>
    Effect.gen(function*() {
      const lock = Mutex.make()
      const gate = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(lock.withLock(Deferred.await(gate)))
      yield* Effect.yieldNow()
      const quitter = yield* Effect.fork(lock.withLock(Effect.succeed("quitter")))
      const next = yield* Effect.fork(lock.withLock(Effect.succeed("next")))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(quitter)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holder)
      expect(yield* Fiber.join(next)).toBe("next")
      expect(yield* lock.withLock(Effect.succeed("free again"))).toBe("free again")
    }))

  it.effect("a waiter interrupted after the lock was handed to it, before it ran, passes the lock on", () =>
    Effect.gen(function*() {
      const lock = Mutex.make()
      yield* lock.acquire
      const handed = yield* Effect.fork(lock.withLock(Effect.succeed("handed")))
      const after = yield* Effect.fork(lock.withLock(Effect.succeed("after")))
      yield* Effect.yieldNow()
      // The release hands the lock to `handed` and the interruption reaches it in the same
      // turn, before it runs: the lock must go on to `after`, not stay with nobody.
      yield* Effect.zipRight(lock.release, Fiber.interrupt(handed))
      expect(yield* Fiber.join(after)).toBe("after")
      expect(yield* lock.withLock(Effect.succeed("free again"))).toBe("free again")
    }))

  it.effect("whenFree runs at once while nobody holds the lock, without taking it", () =>
    Effect.gen(function*() {
      const lock = Mutex.make()
      const ran: Array<string> = []
      lock.whenFree(() => ran.push("a"))
      lock.whenFree(() => ran.push("b"))
      expect(ran).toEqual(["a", "b"])
      expect(yield* lock.withLock(Effect.succeed("free"))).toBe("free")
    }))

  it.effect("whenFree waits for the holder, in line: before a waiter for the lock that came after it, after one that came before", () =>
    Effect.gen(function*() {
      const lock = Mutex.make()
      const order: Array<string> = []
      const gates = [yield* Deferred.make<void>(), yield* Deferred.make<void>()] as const
      const holder = yield* Effect.fork(lock.withLock(Effect.zipRight(Deferred.await(gates[0]), Effect.sync(() => order.push("holder")))))
      yield* Effect.yieldNow()
      lock.whenFree(() => order.push("free 1"))
      const second = yield* Effect.fork(lock.withLock(Effect.zipRight(Deferred.await(gates[1]), Effect.sync(() => order.push("second holder")))))
      yield* Effect.yieldNow()
      lock.whenFree(() => order.push("free 2"))
      expect(order).toEqual([])
      yield* Deferred.succeed(gates[0], undefined)
      yield* Fiber.join(holder)
      // The first holder's release ran `free 1` and handed the lock on; `free 2` waits for the second holder.
      expect(order).toEqual(["holder", "free 1"])
      yield* Deferred.succeed(gates[1], undefined)
      yield* Fiber.join(second)
      expect(order).toEqual(["holder", "free 1", "second holder", "free 2"])
      expect(yield* lock.withLock(Effect.succeed("free again"))).toBe("free again")
    }))

  it.effect("whenFree taken out of the line does not run; the lock is free after its holder", () =>
    Effect.gen(function*() {
      const lock = Mutex.make()
      const ran: Array<string> = []
      yield* lock.acquire
      const leave = lock.whenFree(() => ran.push("left"))
      lock.whenFree(() => ran.push("stayed"))
      leave()
      yield* lock.release
      expect(ran).toEqual(["stayed"])
      expect(yield* lock.withLock(Effect.succeed("free again"))).toBe("free again")
    }))
})
