/**
 * Handlers of the admin API's groups (`AdminApi`): each decodes its request once into
 * `AdminService`'s typed input and answers in the envelope. Bodies are read here (size and
 * depth limits, broken JSON is a 400, as submit's) and decoded with the endpoint's Schema; a
 * rule that needs the clock or the key scopes' parsers is checked here too, with a 400 that
 * names the field. The admin acting is the request's admin key (`CurrentAdmin`).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type { AdminService as AdminServiceNs } from "@mediagate/core"
import { AdminApi, AdminAuth, AdminService, Api, ApiKeys, Credits, Ids, KeyScopes, shortened, ValidationError } from "@mediagate/core"
import { Clock, Effect, Either, Layer, Redacted } from "effect"
import type { Schema } from "effect"
import { currentActor } from "./AdminAuthentication.js"
import { answerErrors } from "./EnvelopeMiddleware.js"
import { readJsonBody } from "./Handlers.js"

/** The HTTP error of each of the admin service's failures. */
type AdminHttpError<E> = E extends AdminServiceNs.AdminNotFound ? Api.NotFound : E extends AdminServiceNs.AdminRefused ? Api.Conflict : E

const toAdminHttpError = <E>(error: E): AdminHttpError<E> =>
  (error instanceof AdminService.AdminNotFound
    // The id as the path gave it, cut short: a path may be kilobytes long.
    ? new Api.NotFound({ code: 404, msg: `no ${error.what} ${shortened(error.id)}` })
    : error instanceof AdminService.AdminRefused
    ? new Api.Conflict({ code: 409, msg: error.message })
    : error) as AdminHttpError<E>

/** The admin API's failures as the envelope's: 404 for what is not there, 409 for what does not apply, and the rest as every endpoint's (`answerErrors`). */
export const adminErrors = <A, E, R>(effect: Effect.Effect<A, E, R>) => answerErrors(Effect.mapError(effect, toAdminHttpError))

/** The request's JSON body decoded with `schema`: 400 naming the field and the rule otherwise. */
export const readBody = <A, I>(request: HttpServerRequest.HttpServerRequest, schema: Schema.Schema<A, I>) =>
  Effect.flatMap(readJsonBody(request), (body) => Either.match(Api.decodeBodyWith(schema)(body), { onLeft: Effect.fail, onRight: Effect.succeed }))

const invalid = (message: string) => new ValidationError({ message })

/** A parser's answer, or a 400 naming `field`. */
const parsed = <A>(field: string, result: Either.Either<A, string>) =>
  Either.match(result, { onLeft: (rule) => Effect.fail(invalid(`${field}: ${rule}`)), onRight: Effect.succeed })

/** An expiry in a body: epoch milliseconds in the future, or null for none. */
export const expiryOf = (field: string, value: string | undefined) =>
  Effect.gen(function*() {
    if (value === undefined) return null
    const at = Api.parseTimestamp(value)!
    if (at <= (yield* Clock.currentTimeMillis)) return yield* Effect.fail(invalid(`${field} must be in the future`))
    return at
  })

/** A key's scope from the body of a key's creation, each rule by the key scopes' own parser. */
const scopeOf = (body: typeof Requests.CreateKeyRequest.Type): Effect.Effect<ApiKeys.KeyScope, ValidationError> =>
  Effect.gen(function*() {
    const models = body.models === undefined ? null : yield* parsed("models", KeyScopes.checkModels(body.models))
    const cap = body.monthly_cap_usd === undefined ? null : yield* parsed("monthly_cap_usd", KeyScopes.parseMonthlyCap(body.monthly_cap_usd))
    const rateLimit = body.rate_limit === undefined ? null : yield* parsed("rate_limit", KeyScopes.parseRateLimit(body.rate_limit))
    return { models, monthlyCapMicroUsd: cap, rateLimit }
  })

const { Requests, Wire } = AdminApi

/** The handlers of the "adminAccounts" group: accounts, keys, secrets and credits. */
export const accountsLayer: Layer.Layer<
  HttpApiGroup.ApiGroup<"mediagate", "adminAccounts">,
  never,
  AdminService.AdminService | AdminAuth.AdminAuthorization
> = HttpApiBuilder.group(Api.MediagateApi, "adminAccounts", (handlers) =>
  Effect.gen(function*() {
    const admin = yield* AdminService.AdminService
    const accountId = (id: string) => Ids.AccountId.make(id)
    return handlers
      .handle("list", () =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          return Api.ok({ accounts: (yield* admin.listAccounts).map((account) => Wire.accountWire(account, now)) })
        }).pipe(adminErrors))
      .handleRaw("create", ({ request }) =>
        Effect.gen(function*() {
          const body = yield* readBody(request, Requests.CreateAccountRequest)
          const created = yield* admin.createAccount(yield* currentActor, { name: body.name.trim() })
          const now = yield* Clock.currentTimeMillis
          return Api.ok({
            account: Wire.accountWire(created.account, now),
            key: Redacted.value(created.key),
            webhook_secret: Redacted.value(created.webhookSecret)
          })
        }).pipe(adminErrors))
      .handle("show", ({ path }) =>
        Effect.gen(function*() {
          const account = yield* admin.getAccount(accountId(path.accountId))
          return Api.ok(Wire.accountWire(account, yield* Clock.currentTimeMillis))
        }).pipe(adminErrors))
      .handleRaw("createKey", ({ path, request }) =>
        Effect.gen(function*() {
          const body = yield* readBody(request, Requests.CreateKeyRequest)
          const expiresAt = yield* expiryOf("expires_at", body.expires_at)
          const scope = yield* scopeOf(body)
          const created = yield* admin.createKey(yield* currentActor, accountId(path.accountId), {
            label: body.label?.trim() ?? null,
            expiresAt,
            scope
          })
          return Api.ok({ key: Redacted.value(created.key), info: Wire.keyWire(created.info, yield* Clock.currentTimeMillis) })
        }).pipe(adminErrors))
      .handle("revokeKey", ({ path }) =>
        Effect.gen(function*() {
          const revoked = yield* admin.revokeKey(yield* currentActor, path.keyId)
          return Api.ok(Wire.keyWire(revoked, yield* Clock.currentTimeMillis))
        }).pipe(adminErrors))
      .handle("secrets", ({ path }) =>
        Effect.gen(function*() {
          const secrets = yield* admin.secrets(accountId(path.accountId))
          return Api.ok(Wire.secretsWire(path.accountId, secrets, yield* Clock.currentTimeMillis))
        }).pipe(adminErrors))
      .handleRaw("rotateSecret", ({ path, request }) =>
        Effect.gen(function*() {
          const body = yield* readBody(request, Requests.RotateSecretRequest)
          const graceMs = (body.grace_seconds ?? Requests.defaultGraceSeconds) * 1000
          const secrets = yield* admin.rotateSecret(yield* currentActor, accountId(path.accountId), graceMs)
          return Api.ok(Wire.secretsWire(path.accountId, secrets, yield* Clock.currentTimeMillis))
        }).pipe(adminErrors))
      .handleRaw("addCredits", ({ path, request }) =>
        Effect.gen(function*() {
          const body = yield* readBody(request, Requests.AddCreditsRequest)
          const amountMicroUsd = yield* parsed("amount_usd", Credits.parseUsd(body.amount_usd))
          const added = yield* admin.addCredits(yield* currentActor, {
            accountId: accountId(path.accountId),
            amountMicroUsd,
            note: body.note?.trim() ?? "added by admin",
            entryId: body.entry_id
          })
          return Api.ok(Wire.creditsAddedWire(path.accountId, added))
        }).pipe(adminErrors))
      .handle("credits", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const credits = yield* admin.credits(accountId(path.accountId), urlParams.limit ?? Requests.defaultCreditEntries)
          return Api.ok(Wire.creditsWire(path.accountId, credits))
        }).pipe(adminErrors))
  }))
