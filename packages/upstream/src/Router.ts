/**
 * Routing: the Upstream of a deployment with real providers. A route maps a catalog model to
 * provider targets in order (provider, the provider's model id, and how the normalised job
 * becomes that provider's input). A job runs on its route's first target; the engine moves
 * it to the next one (`failover`) when the target's transient failures run out or its
 * circuit is open. Models without a route run on `unrouted` when the host gives one (the
 * simulator, when the operator says so), and otherwise fail with a message naming the model.
 */
import type * as HttpClient from "@effect/platform/HttpClient"
import type { Ids, Task } from "@mediagate/core"
import { Upstream, UpstreamError } from "@mediagate/core"
import { Context, Effect, Layer } from "effect"
import * as CircuitBreaker from "./CircuitBreaker.js"

/** What a provider adapter runs: a job on the provider's model. */
export interface ProviderJob {
  readonly job: Task.UpstreamJob
  /** The provider's model id (`fal-ai/flux/dev`, `black-forest-labs/flux-schnell`, `gpt-image-1`). */
  readonly model: string
}

/** The provider's input for a job, made by the target's `input`. */
export type ProviderInput = Readonly<Record<string, unknown>>

/** What a provider's submit is told: the engine's context, and where the provider may send its webhook. */
export interface ProviderContext extends Upstream.SubmitContext {
  /** `<webhooks.baseUrl>/<provider>/<taskId>`, when the router receives webhooks and the provider verifies them. */
  readonly webhookUrl?: string
}

/** A provider adapter (fal, Replicate, OpenAI images, relay): the Upstream contract on provider jobs. */
export interface Provider {
  readonly name: string
  readonly submit: (
    job: ProviderJob,
    input: ProviderInput,
    context: ProviderContext
  ) => Effect.Effect<Upstream.SubmitOutcome, UpstreamError, HttpClient.HttpClient>
  readonly poll: (upstreamId: Ids.UpstreamId, job: ProviderJob) => Effect.Effect<Upstream.PollOutcome, UpstreamError, HttpClient.HttpClient>
  readonly cancel?: (upstreamId: Ids.UpstreamId, job: ProviderJob) => Effect.Effect<void, UpstreamError, HttpClient.HttpClient>
  /** Whether a webhook is this provider's, signed and fresh; a provider without it gets no webhook URL. */
  readonly verifyWebhook?: (webhook: Upstream.InboundWebhook) => Effect.Effect<boolean, never, HttpClient.HttpClient>
}

/** One provider target of a route. */
export interface Target {
  /** The name of a provider given to the router (`fal`, `replicate`, `openai`, `relay`). */
  readonly provider: string
  /** The provider's model id. */
  readonly model: string
  /**
   * The provider's input for a job; `request` is the client's input as submitted, with
   * `model` (the relay passes it on as it is).
   */
  readonly input: (job: Task.UpstreamJob, request: Task.TaskInput) => ProviderInput
  /**
   * Jobs the target runs at once, over every node on the store; more wait PENDING in line,
   * fair by account. They count against the provider's limit (`maxRunningPerProvider`) too.
   * The limit is the target's (`targetName`) in every route that names it. Default: only
   * the provider's limit.
   */
  readonly maxRunning?: number
}

/**
 * A route: the catalog model it serves, by the model the job runs (`alpha-image-2`, or the
 * fallback's `motion-1.5-pro`) or that model with its mode (`alpha-image-2/image-to-image`,
 * which wins over the model alone), and its targets in order.
 */
export interface Route {
  readonly model: string
  readonly targets: ReadonlyArray<Target>
}

export interface Options {
  readonly routes: ReadonlyArray<Route>
  readonly providers: ReadonlyArray<Provider>
  /** Runs the jobs of models without a route (the simulator); without it they fail. */
  readonly unrouted?: Context.Tag.Service<Upstream.Upstream>
  /** The name attempts on `unrouted` carry (`attempts[].provider`). Default `unrouted`. */
  readonly unroutedName?: string
  readonly circuit?: CircuitBreaker.Options
  /**
   * Where providers send their webhooks (`https://gateway.example/webhooks`): each submit to a
   * provider that verifies webhooks names `<baseUrl>/<provider>/<taskId>`. Without it, jobs are
   * only polled.
   */
  readonly webhooks?: { readonly baseUrl: string }
}

/** The name of a target in attempts and logs: `fal:fal-ai/flux/dev`. */
export const targetName = (target: Pick<Target, "provider" | "model">) => `${target.provider}:${target.model}`

/**
 * The running limits of the targets that set one, by target name, or the first two routes
 * that give one target different limits.
 */
export const targetLimits = (routes: ReadonlyArray<Route>) => {
  const limits: Record<string, { maxRunning: number; provider: string }> = {}
  for (const route of routes) {
    for (const target of route.targets) {
      if (target.maxRunning === undefined) continue
      const name = targetName(target)
      const set = limits[name]
      if (set !== undefined && set.maxRunning !== target.maxRunning) {
        return { conflict: `${name} has maxRunning ${set.maxRunning} in one route and ${target.maxRunning} in the route of ${route.model}` }
      }
      limits[name] = { maxRunning: target.maxRunning, provider: target.provider }
    }
  }
  return { limits }
}

/**
 * Every target of the routes once, in the routes' order, with its own running limit; then
 * the upstream of unrouted models, when there is one (under `unroutedName`).
 */
const targetsOf = (options: Options) => {
  const seen = new Map<string, Omit<Upstream.TargetStatus, "circuit">>()
  for (const route of options.routes) {
    for (const target of route.targets) {
      const name = targetName(target)
      if (!seen.has(name)) seen.set(name, { name, provider: target.provider, maxRunning: target.maxRunning ?? null })
    }
  }
  const unrouted = options.unrouted === undefined ? [] : [{ name: options.unroutedName ?? "unrouted", provider: null, maxRunning: null }]
  return [...seen.values(), ...unrouted]
}

export const make = (options: Options): Effect.Effect<Context.Tag.Service<Upstream.Upstream>, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const context = yield* Effect.context<HttpClient.HttpClient>()
    const providers = new Map(options.providers.map((provider) => [provider.name, provider]))
    for (const route of options.routes) {
      for (const target of route.targets) {
        if (!providers.has(target.provider)) {
          // The host's configuration is wrong: stop at start (the routes file checks this first, with lines).
          return yield* Effect.dieMessage(`the route of ${route.model} names provider "${target.provider}", which is not configured`)
        }
      }
    }
    const limited = targetLimits(options.routes)
    // The host's configuration is wrong (the routes file checks this first, with lines).
    if (limited.limits === undefined) return yield* Effect.dieMessage(limited.conflict)
    const limits = limited.limits
    const routes = new Map(options.routes.map((route) => [route.model, route]))
    const breaker = CircuitBreaker.make(options.circuit)
    const routeOf = (job: Task.UpstreamJob) => routes.get(`${job.model}/${job.mode}`) ?? routes.get(job.model)

    /** The job's target: its route's target number `job.target` (the first when absent). */
    const resolve = (job: Task.UpstreamJob) => {
      const route = routeOf(job)
      if (route === undefined) return undefined
      const target = route.targets[Math.min(job.target ?? 0, route.targets.length - 1)]!
      const provider = providers.get(target.provider)!
      return { name: targetName(target), provider, target, work: { job, model: target.model } }
    }

    const noRoute = (job: Task.UpstreamJob) =>
      Effect.fail(new UpstreamError({ message: `no provider is configured for model ${job.model}`, reason: null, retryable: false }))

    const service: Context.Tag.Service<Upstream.Upstream> = {
      submit: (job, submitContext) => {
        const found = resolve(job)
        if (found !== undefined) {
          const input = found.target.input(job, submitContext.request)
          const webhook = options.webhooks !== undefined && found.provider.verifyWebhook !== undefined
            ? { webhookUrl: `${options.webhooks.baseUrl.replace(/\/+$/, "")}/${encodeURIComponent(found.provider.name)}/${encodeURIComponent(submitContext.taskId)}` }
            : {}
          return breaker.run(found.name, Effect.provide(found.provider.submit(found.work, input, { ...submitContext, ...webhook }), context))
        }
        return options.unrouted === undefined ? noRoute(job) : options.unrouted.submit(job, submitContext)
      },
      poll: (upstreamId, job) => {
        const found = resolve(job)
        if (found !== undefined) {
          // A job already accepted is polled whatever the circuit says; the outcome still counts.
          return breaker.run(found.name, Effect.provide(found.provider.poll(upstreamId, found.work), context), false)
        }
        return options.unrouted === undefined ? noRoute(job) : options.unrouted.poll(upstreamId, job)
      },
      cancel: (upstreamId, job) => {
        const found = resolve(job)
        if (found !== undefined) {
          return found.provider.cancel === undefined ? Effect.void : found.provider.cancel(upstreamId, found.work).pipe(Effect.provide(context))
        }
        return options.unrouted?.cancel === undefined ? Effect.void : options.unrouted.cancel(upstreamId, job)
      },
      failover: (job) => {
        const route = routeOf(job)
        const next = (job.target ?? 0) + 1
        return route !== undefined && next < route.targets.length ? { ...job, target: next } : undefined
      },
      notifies: (job) => options.webhooks !== undefined && resolve(job)?.provider.verifyWebhook !== undefined,
      verifyWebhook: (webhook) => {
        const provider = providers.get(webhook.provider)
        return provider?.verifyWebhook === undefined ? Effect.succeed(false) : Effect.provide(provider.verifyWebhook(webhook), context)
      },
      provider: (job) => {
        const found = resolve(job)
        // A target with a limit of its own is counted under its name (and, through
        // `targetLimits`, its provider's); a failover moves the job to its next target's name.
        if (found !== undefined) return limits[found.name] === undefined ? found.provider.name : found.name
        return options.unrouted?.provider === undefined ? null : options.unrouted.provider(job)
      },
      targetLimits: limits,
      targets: Effect.forEach(targetsOf(options), (target) =>
        Effect.map(breaker.view(target.name), (circuit) => ({ ...target, circuit }))),
      describe: (job) => {
        const found = resolve(job)
        return found === undefined ? options.unroutedName ?? "unrouted" : found.name
      }
    }
    return service
  })

/** The router as the deployment's Upstream. */
export const layer = (options: Options): Layer.Layer<Upstream.Upstream, never, HttpClient.HttpClient> =>
  Layer.effect(Upstream.Upstream, make(options))

/** A breaker's view for tests: the status of a target's circuit. */
export { CircuitBreaker }
