/**
 * A sync job whose task is SUBMITTED with no upstream job: an async provider accepted the
 * task's job, its poll failed, and the task moved to a target that answers the call itself.
 * The next step makes the sync call on that target; before, the claim only took the lease
 * and the task waited, never called, until its deadline.
 */
import { describe, expect, it } from "@effect/vitest"
import { Ids, ModelCatalog, TaskServiceAlone, TaskStore, Upstream, UpstreamError } from "@mediagate/core"
import type { Task } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryTaskStore } from "@mediagate/store-memory"
import { Effect, Layer, Option, Ref, TestClock } from "effect"
import { Engine } from "../src/index.js"

const result: Task.TaskResult = { type: "image", urls: ["https://cdn.example/a.png"] }

const settle = Effect.gen(function*() {
  for (let i = 0; i < 20; i++) yield* Effect.yieldNow()
  yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
  for (let i = 0; i < 20; i++) yield* Effect.yieldNow()
})

const advance = (seconds: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < seconds; i++) {
      yield* TestClock.adjust("1 second")
      yield* settle
    }
  })

describe("Engine: a sync job SUBMITTED after a failover", () => {
  it.effect("is called on the next target at its next step and succeeds, long before its deadline", () =>
    Effect.gen(function*() {
      const submits = yield* Ref.make<ReadonlyArray<number | null>>([])
      // Target 0, async, accepts the job, and its poll fails with the circuit open; target 1
      // answers the call with the result.
      const upstream = Layer.succeed(Upstream.Upstream, {
        submit: (job) =>
          Ref.update(submits, (all) => [...all, job.target ?? null]).pipe(
            Effect.as(
              job.target === 1
                ? { _tag: "Completed" as const, result }
                : { _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make("up-0") }
            )
          ),
        poll: () => Effect.fail(new UpstreamError({ message: "target down", reason: null, retryable: true, circuitOpen: true })),
        failover: (job) => (job.target === undefined || job.target === 0 ? { ...job, target: 1, sync: true } : undefined)
      })
      yield* Effect.gen(function*() {
        const store = yield* TaskStore.TaskStore
        const id = Ids.TaskId.make("t1")
        yield* store.create(Testing.record({ id, createdAt: 0, deadlineAt: 600_000, job: Testing.job({ sync: false }) }))
        yield* advance(5)
        const done = Option.getOrThrow(yield* store.get(id))
        expect(yield* Ref.get(submits)).toEqual([null, 1])
        expect([done.status, done.result, done.job.target]).toEqual(["SUCCESS", result, 1])
        // The first attempt's job was accepted (the task SUBMITTED), then failed over.
        expect(done.attempts.map((attempt) => [attempt.upstreamId, attempt.outcome])).toEqual([["up-0", "failed"], [null, "succeeded"]])
      }).pipe(
        Effect.provide(
          Engine.layer().pipe(
            Layer.provide(TaskServiceAlone.writes),
            Layer.provideMerge(MemoryTaskStore.layer),
            Layer.provide([upstream, Ids.layerTest, ModelCatalog.layer])
          )
        ),
        Effect.scoped
      )
    }))
})
