/**
 * The promise facade for callers without Effect: the same client, each call run to a
 * Promise over the platform's fetch. A failed call rejects with the client's error itself
 * (`MediagateError` with `status`, `code`, `msg`; `TransportError`; `RunTimeout`).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import type { ModelInfo, Task } from "@mediagate/core"
import { Duration, Effect, Either } from "effect"
import type { ClientOptions, Estimate, ListOptions, SubmitOptions, TaskPage } from "./MediagateClient.js"
import type { FileInput, Upload, WithFiles } from "./FileInputs.js"
import * as MediagateClient from "./MediagateClient.js"
import type { InputOf, ModelId } from "./Models.js"

/** Options of `Mediagate#run`. */
export interface PromiseRunOptions extends SubmitOptions {
  /** Called with the task on the first answer, on each change of its status, and on each change of its progress (the second argument). */
  readonly onProgress?: (task: Task.Task, progress: Task.WireProgress | null) => void
  /** Milliseconds (or a Duration such as "10 minutes") to wait for the task's end before rejecting with RunTimeout. */
  readonly timeout?: Duration.DurationInput
  /** Polling (a server without the events stream), how long each query asks the server to hold its answer. Default 20 seconds. */
  readonly wait?: Duration.DurationInput
  /** Stops waiting (the task goes on at the server). */
  readonly signal?: AbortSignal
}

/** The mediagate API with Promises: `new Mediagate({ baseUrl, apiKey })`. */
export class Mediagate {
  readonly #client: MediagateClient.Client

  constructor(options: ClientOptions & { readonly fetch?: typeof globalThis.fetch }) {
    this.#client = MediagateClient.make(options).pipe(
      Effect.provide(FetchHttpClient.layer),
      options.fetch === undefined ? (effect) => effect : Effect.provideService(FetchHttpClient.Fetch, options.fetch),
      Effect.runSync
    )
  }

  /**
   * Submits a task and resolves with its id as a plain string, not the `{ taskId }` object
   * the HTTP answer's `data` is: `const taskId = await mediagate.submit(model, input)`, with
   * no `.taskId` after it. `input` is type-checked against the model's input. A Blob or a
   * local path (Node) in a media URL field is uploaded first and its URL submitted.
   */
  submit<M extends ModelId>(model: M, input: WithFiles<InputOf<M>>, options?: SubmitOptions): Promise<string> {
    return run(this.#client.submit(model, input, options))
  }

  /**
   * What a submit of the same model, input and options would store and charge, with nothing
   * created or held (see `MediagateClient.Client#estimate`).
   */
  estimate<M extends ModelId>(model: M, input: InputOf<M>, options?: Omit<SubmitOptions, "idempotencyKey">): Promise<Estimate> {
    return run(this.#client.estimate(model, input, options))
  }

  /** The task as it is now. */
  get(taskId: string): Promise<Task.Task> {
    return run(this.#client.get(taskId))
  }

  /** Your tasks, newest first, optionally only some statuses, a model, a time range. */
  list(options?: ListOptions): Promise<TaskPage> {
    return run(this.#client.list(options))
  }

  /** Cancels a task that has not ended; resolves with it, CANCELLED. */
  cancel(taskId: string): Promise<Task.Task> {
    return run(this.#client.cancel(taskId))
  }

  /** Submits (uploading local files first, as `submit`) and resolves with the ended task, whatever its status. */
  run<M extends ModelId>(model: M, input: WithFiles<InputOf<M>>, options: PromiseRunOptions = {}): Promise<Task.Task> {
    const { signal, ...rest } = options
    return run(this.#client.run(model, input, rest), signal)
  }

  /**
   * Uploads a file (`POST /api/v1/files`): a Blob or File, or in Node a path (streamed from
   * disk); resolves with the upload, whose `url` works in any URL input.
   */
  upload(file: FileInput): Promise<Upload> {
    return run(this.#client.upload(file))
  }

  /** The model catalog. */
  models(): Promise<ReadonlyArray<ModelInfo.ModelInfo>> {
    return run(this.#client.models)
  }
}

/** Runs a call; a failure rejects with the error itself, not a FiberFailure around it. */
const run = <A, E>(effect: Effect.Effect<A, E>, signal?: AbortSignal): Promise<A> =>
  Effect.runPromise(Effect.either(effect), signal === undefined ? undefined : { signal }).then(
    Either.getOrThrowWith((error) => error)
  )
