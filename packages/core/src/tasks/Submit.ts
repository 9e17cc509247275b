/**
 * Submit (spec section 4.1) and its estimate: every rule a submit checks, moderation, and the
 * new task stored with its price held, or failed at once by a rule the spec says fails the
 * task. A submit under an Idempotency-Key goes through `IdempotentSubmit`. A scoped key's
 * rules (`KeyScopes`) refuse the call (403), nothing created or held: a model its patterns do
 * not allow (submit and estimate), a hold past its monthly cap (submit).
 *
 * A media URL under this deployment's own media base (`SubmitPolicy.mediaBaseUrl`) names a
 * file of its MediaStore: it is judged by the store, not by its host (it is never fetched over
 * the network): an upload must exist and not have expired, and a task accepted with it pins it
 * to the task's deadline (`Uploads.pin`), so it is kept as long as the task may read it.
 */
import { Clock, Context, Data, Duration, Effect, Either, Option } from "effect"
import { MediaStore, parseKey } from "../services/MediaStore.js"
import { Uploads } from "../services/Uploads.js"
import type { Account } from "../services/Accounts.js"
import type { SubmitRequest } from "../api/Api.js"
import { ModerationRejected, ModerationUnavailable, StoreError, ValidationError } from "../domain/Errors.js"
import * as Credits from "./Credits.js"
import * as KeyScopes from "../domain/KeyScopes.js"
import type * as IdempotencyKeys from "../services/IdempotencyKeys.js"
import * as IdempotentSubmit from "./IdempotentSubmit.js"
import { Ids, type TaskId } from "../domain/Ids.js"
import { ModelCatalog } from "../models/ModelCatalog.js"
import type { ModelSpec } from "../models/ModelSpec.js"
import { Moderation } from "../services/Moderation.js"
import * as Pricing from "../models/Pricing.js"
import { Prices } from "../models/Pricing.js"
import type { TaskInput, UpstreamJob } from "../domain/Task.js"
import * as Transition from "../domain/Transition.js"
import { CallbackEvent, checkedRecord } from "../domain/Task.js"
import { TaskWakeup } from "../services/TaskEvents.js"
import { Upstream } from "../services/Upstream.js"
import { TaskWrites } from "./TaskWrites.js"
import { checkUrl, underMediaBase } from "../domain/UrlPolicy.js"
import { unsupportedModel } from "./UnsupportedModel.js"
import { showAsHttps } from "./OwnMediaSchemes.js"
import { traced } from "./SpanOptions.js"

/** What the submit use case accepts beyond the model's own rules. */
export interface Policy {
  /** Accept localhost and private addresses in callBackUrl and media URLs (development and tests only). */
  readonly allowPrivateUrls: boolean
  /**
   * This deployment's media base (`<public base>/media`): a media URL under it names a file
   * of the MediaStore (an upload, a result) and is judged by the store, whatever its host.
   * Absent: every URL is judged by its host.
   */
  readonly mediaBaseUrl?: string | undefined
}

/** The submit use case's `Policy`; by default private addresses refused, no media base. */
export class SubmitPolicy extends Context.Reference<SubmitPolicy>()("@mediagate/core/SubmitPolicy", {
  defaultValue: (): Policy => ({ allowPrivateUrls: false })
}) {}

/**
 * Deadlines by model family (`motion`, `clip3`, `alpha-image-2`, ...; docs/models.md lists
 * each model's family and default): a task of a family listed here ends TIMEOUT after this
 * long instead of its model's default.
 */
export class Deadlines extends Context.Reference<Deadlines>()("@mediagate/core/Deadlines", {
  defaultValue: (): ReadonlyMap<string, Duration.Duration> => new Map()
}) {}

/** How a file of ours is asked for again when its URL no longer names one. */
const uploadAgain = "upload the file again (POST /api/v1/files)"

/** The callback address must be an absolute http(s) URL on a public host (unless the policy allows private ones). */
const checkCallBackUrl = (callBackUrl: string | undefined, allowPrivate: boolean) => {
  const problem = callBackUrl === undefined ? undefined : checkUrl(callBackUrl, { protocols: ["http:", "https:"], allowPrivate })
  return problem === undefined ? Either.right(undefined) : Either.left(new ValidationError({ message: `callBackUrl ${problem}` }))
}

/** What a submit would store and charge (`TaskService.estimate`). */
export interface Estimate {
  /** The model id as submitted. */
  readonly model: string
  /** The input as the task would store it (and the query endpoint show it). */
  readonly input: TaskInput
  /** The normalised job: defaults resolved, `adjustments` made, `priceMicroUsd` set. */
  readonly job: UpstreamJob
  /** Set when a rule of the model would fail the task at once (INVALID_PARAMETERS). */
  readonly rejection: string | undefined
}

/** What a submit may carry beyond its body. */
export interface SubmitOptions {
  /** The request's Idempotency-Key and the fingerprint of its body (`IdempotencyKeys.fingerprint`). */
  readonly idempotency?: { readonly key: string; readonly fingerprint: string } | undefined
}

/** A rule of the caller's key refused the request (403): its message names the rule. Nothing was created or held. */
export class KeyScopeRefused extends Data.TaggedError("KeyScopeRefused")<{ readonly message: string }> {}

/** Re-exported so handlers can name every failure of submit. */
export type SubmitError =
  | StoreError
  | KeyScopeRefused
  | ValidationError
  | ModerationRejected
  | ModerationUnavailable
  | IdempotencyKeys.IdempotencyKeyMismatch
  | IdempotencyKeys.IdempotencyKeyInUse

/** `submit` and `estimate` over the catalog, its price table, moderation and the write path; dies at once when the price table is incomplete. */
export const make = Effect.gen(function*() {
  const ids = yield* Ids
  const catalog = yield* ModelCatalog
  const moderation = yield* Moderation
  const wakeup = yield* TaskWakeup
  const upstream = yield* Upstream
  const deadlines = yield* Deadlines
  const writes = yield* TaskWrites
  const prices = yield* Prices
  // An incomplete price table is the host's configuration bug: stop at start, not at a submit.
  yield* Either.match(Pricing.validate(catalog.models, prices), {
    onLeft: (missing) => Effect.dieMessage(`mediagate: the price table is incomplete: ${missing}`),
    onRight: () => Effect.void
  })
  const modelIds = catalog.models.map((model) => model.id)
  // Both are in every composition that serves media; without them no URL is taken for ours.
  const uploads = yield* Effect.serviceOption(Uploads)
  const media = yield* Effect.serviceOption(MediaStore)

  /**
   * A media URL under our media base, by what the MediaStore holds under its name: an upload
   * (its id, to pin), a file of ours that is no upload (a result: nothing to pin), or a
   * refusal naming the field (no such file, or an upload past its expiresAt).
   */
  const ownFile = (path: string, url: string, name: string, now: number) =>
    Effect.gen(function*() {
      const unknown = new ValidationError({ message: `input.${path} names no file of this server (${url}): ${uploadAgain}` })
      if (Option.isNone(parseKey(name)) || Option.isNone(media)) return yield* unknown
      const upload = Option.isNone(uploads) ? Option.none() : yield* uploads.value.byMediaKey(name)
      if (Option.isSome(upload)) {
        if (now >= upload.value.expiresAt) {
          return yield* new ValidationError({
            message: `input.${path} is an upload that expired at ${new Date(upload.value.expiresAt).toISOString()}: ${uploadAgain}`
          })
        }
        return Option.some(upload.value.id)
      }
      const stored = yield* media.value.stat(name).pipe(
        Effect.mapError((error) => new StoreError({ message: `the media store could not say whether it holds ${name}: ${error.message}`, cause: error }))
      )
      return Option.isSome(stored) ? Option.none<string>() : yield* unknown
    })

  /**
   * Every media URL (the fields the model's schema marks) must name a public host (unless the
   * policy allows private ones), or a file of ours (`ownFile`); answers the ids of the uploads
   * among them.
   */
  const checkMediaUrls = (model: ModelSpec, input: Record<string, unknown>, policy: Policy) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const uploadIds = new Set<string>()
      for (const { path, url } of model.mediaUrls(input)) {
        const name = policy.mediaBaseUrl === undefined ? undefined : underMediaBase(url, policy.mediaBaseUrl)
        // Ours is read from the store, never over the network: its host is not judged, the rest of the rule is.
        const problem = checkUrl(url, { protocols: ["http:", "https:"], allowPrivate: name !== undefined || policy.allowPrivateUrls })
        if (problem !== undefined) {
          return yield* new ValidationError({ message: `input.${path} ${problem} for ${model.id}` })
        }
        if (name !== undefined) Option.map(yield* ownFile(path, url, name, now), (id) => uploadIds.add(id))
      }
      return uploadIds
    })

  /**
   * Every rule a submit checks before moderation, in its order, with nothing written: the
   * model, its normalised and priced job, and the input as the task stores it. Submit and
   * estimate both go through it, so an estimate refuses exactly what a submit refuses.
   */
  const prepare = (request: SubmitRequest, account: Account | undefined) => Effect.gen(function*() {
    const policy = yield* SubmitPolicy
    yield* checkCallBackUrl(request.callBackUrl, policy.allowPrivateUrls)
    if (request.callBackEvents !== undefined && request.callBackUrl === undefined) {
      return yield* new ValidationError({ message: "callBackEvents needs a callBackUrl to send them to" })
    }
    const model = yield* Option.match(catalog.find(request.model), {
      onNone: () => Effect.fail(unsupportedModel(request.model, modelIds)),
      onSome: Effect.succeed
    })
    // After the model is known to exist, so an unknown one is still the catalog's 400.
    if (!KeyScopes.modelAllowed(account?.scope, request.model)) {
      return yield* new KeyScopeRefused({ message: KeyScopes.modelRefusal(account?.scope, request.model) })
    }
    // Our own files are judged by the store below, not by the schema's https rule.
    const shown = showAsHttps(request.input, policy.mediaBaseUrl)
    const normalized = shown.restore(yield* model.normalize(shown.input))
    const uploadIds = yield* checkMediaUrls(model, request.input, policy)
    const job: UpstreamJob = { ...normalized.job, priceMicroUsd: model.price(normalized.job, prices) }
    // The task's model is the submitted top-level one, whatever the input holds.
    const { model: _ignored, ...inputFields } = request.input
    const input: TaskInput = { model: request.model, ...inputFields }
    return { model, normalized, job, input, uploadIds }
  })

  /** Validates, moderates and stores a new PENDING task (with `given` as its id, else a new one); returns its id. */
  const create = (account: Account, request: SubmitRequest, given?: TaskId) => Effect.gen(function*() {
    const { input, job, model, normalized, uploadIds } = yield* prepare(request, account)
    const verdict = yield* moderation.check(job.prompt)
    if (verdict.flagged) {
      return yield* new ModerationRejected({ flagged: verdict.flagged, categories: verdict.categories })
    }

    const now = yield* Clock.currentTimeMillis
    const taskId = given ?? (yield* ids.taskId)
    const pending = checkedRecord({
        id: taskId,
        ownerId: account.id,
        status: "PENDING",
        input,
        job,
        result: null,
        failureReason: null,
        errorMessage: null,
        callBackUrl: request.callBackUrl ?? null,
        // The events asked for, each once, in a fixed order (started, progress, completed).
        callbackEvents: request.callBackEvents === undefined
          ? null
          : { events: CallbackEvent.literals.filter((event) => request.callBackEvents!.includes(event)), lastProgress: null },
        userId: request.user_id ?? null,
        upstreamId: null,
        createdAt: now,
        updatedAt: now,
        deadlineAt: now + Duration.toMillis(deadlines.get(model.family) ?? model.deadline),
        dueAt: now,
        leaseOwner: null,
        leaseUntil: null,
        version: 1,
        provider: upstream.provider !== undefined ? upstream.provider(job) : null,
        keyId: account.keyId ?? null
      })
    // Rules the spec says fail the task (not the call): the task is accepted and fails at
    // once. Otherwise it is stored with its price held, both or neither (one transaction
    // when the ledger is in the task store's database), so a stored running task always has
    // its reservation and a failed write holds nothing; an account that cannot pay gets a
    // task that failed with INSUFFICIENT_POINTS, as the spec's failure table has it. A key
    // past its monthly cap is refused (403), nothing written: the key's rule, not the task's.
    const fail = (reason: "INVALID_PARAMETERS" | "INSUFFICIENT_POINTS", message: string) =>
      Effect.flatMap(Effect.orDie(Transition.apply(pending, { to: "FAILURE", reason, message }, now)), writes.create)
    if (normalized.rejection !== undefined) {
      yield* fail("INVALID_PARAMETERS", normalized.rejection)
    } else {
      // Before the task exists, so that no stored task reads an upload the sweep may take: kept
      // to its deadline, after which it has ended. (A task refused after this leaves a longer pin, no more.)
      if (Option.isSome(uploads)) yield* Effect.forEach(uploadIds, (id) => uploads.value.pin(id, pending.deadlineAt), { discard: true })
      yield* writes.createHeld(pending, now, account.scope?.monthlyCapMicroUsd ?? null).pipe(
        Effect.zipRight(wakeup.wake),
        Effect.catchTags({
          InsufficientCredits: (error) => fail("INSUFFICIENT_POINTS", Credits.insufficientMessage(error)),
          KeyCapReached: (error) => Effect.fail(new KeyScopeRefused({ message: KeyScopes.capRefusal(error) }))
        })
      )
    }
    return taskId
  })

  const submitOnce = yield* IdempotentSubmit.make(create)

  /**
   * Validates, moderates and stores a new PENDING task; returns its id, and whether it is
   * the task an earlier request with the same Idempotency-Key created (`replayed`).
   */
  const submit = traced("TaskService.submit")(
    function*(account: Account, request: SubmitRequest, options: SubmitOptions = {}) {
      if (options.idempotency === undefined) return { taskId: yield* create(account, request), replayed: false }
      return yield* submitOnce(account, request, options.idempotency.key, options.idempotency.fingerprint)
    }
  )

  /**
   * What a submit of `request` would store and charge, with nothing created, held or
   * moderated: the rules' refusals are submit's own (`prepare`), a model the caller's key may
   * not use among them (`account`, when given); a key's cap is not checked (nothing is held).
   * `rejection` is the message a task refused by a rule of its model (motion's mediaUrls
   * counts) would fail with at once.
   */
  const estimate = traced("TaskService.estimate")(function*(request: SubmitRequest, account?: Account) {
    const { input, job, normalized } = yield* prepare(request, account)
    return { model: request.model, input, job, rejection: normalized.rejection } satisfies Estimate
  })

  return { submit, estimate } as const
})
