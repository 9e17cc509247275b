/**
 * Valid jobs and task records with neutral values, for tests, benchmarks and tools that
 * need one without going through a model, and `until`, for tests that wait on real I/O.
 * Imported from `@mediagate/core/testing`, never from the public index: no library code may
 * build its data from a fixture.
 */
import { Effect } from "effect"
import { AccountId, TaskId, UpstreamId } from "./domain/Ids.js"
import type { UpstreamJob } from "./domain/Task.js"
import { TaskRecord } from "./domain/Task.js"

/** An alpha-image-2 text-to-image job (1k, 16:9, n 1); override what matters. */
export const job = (overrides: Partial<UpstreamJob> = {}): UpstreamJob => ({
  model: "alpha-image-2",
  mode: "text-to-image",
  output: "image",
  prompt: "a test",
  n: 1,
  ratio: "16:9",
  resolution: "1k",
  width: 1536,
  height: 864,
  duration: null,
  imageUrls: [],
  params: {},
  fallbackModel: null,
  sync: true,
  priceMicroUsd: 20_000,
  adjustments: [],
  ...overrides
})

/** The owner of `record`'s tasks unless overridden. */
export const owner = AccountId.make("acct_test")

/** A PENDING task of owner `acct_test`, created and due at `createdAt` (default 0); override what matters. */
export const record = (
  overrides:
    & Omit<Partial<ConstructorParameters<typeof TaskRecord>[0]>, "id" | "ownerId" | "upstreamId">
    & { readonly id: string; readonly ownerId?: string; readonly upstreamId?: string | null }
): TaskRecord => {
  const createdAt = overrides.createdAt ?? 0
  return new TaskRecord({
    status: "PENDING",
    input: { model: "alpha-image-2/text-to-image", prompt: "a test" },
    job: job(),
    result: null,
    failureReason: null,
    errorMessage: null,
    callBackUrl: null,
    userId: null,
    createdAt,
    updatedAt: createdAt,
    deadlineAt: createdAt + 600_000,
    dueAt: createdAt,
    leaseOwner: null,
    leaseUntil: null,
    version: 1,
    ...overrides,
    id: TaskId.make(overrides.id),
    ownerId: AccountId.make(overrides.ownerId ?? owner),
    upstreamId: overrides.upstreamId === undefined || overrides.upstreamId === null ? null : UpstreamId.make(overrides.upstreamId)
  })
}

/**
 * Runs `effect` until `done` holds of its value, an event-loop turn between tries (real I/O
 * finishing, such as a receiver's request or a swept file's deletion), never a timed sleep;
 * dies after 5,000 turns.
 */
export const until = <A, E, R>(effect: Effect.Effect<A, E, R>, done: (a: A) => boolean): Effect.Effect<A, E, R> =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 5_000; turn++) {
      const value = yield* effect
      if (done(value)) return value
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    }
    return yield* Effect.dieMessage("condition not reached")
  })
