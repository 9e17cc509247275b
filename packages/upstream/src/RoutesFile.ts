/**
 * The routes file of the standalone server (`MEDIAGATE_ROUTES`): JSON, validated with Schema
 * at start; every error names the line of the file that is wrong. Provider keys and base
 * URLs never appear here: they come from the environment.
 *
 * ```json
 * {
 *   "routes": [
 *     { "model": "alpha-image-2",
 *       "targets": [
 *         { "provider": "openai", "model": "gpt-image-1" },
 *         { "provider": "fal", "model": "fal-ai/flux/dev", "maxRunning": 4,
 *           "input": { "prompt": "$prompt", "num_images": "$n", "image_size": { "width": "$width", "height": "$height" } } }
 *       ] }
 *   ]
 * }
 * ```
 *
 * A target's `input` is a template of the provider's input: a string `"$name"` is replaced
 * by that value of the job (below), and a key whose value is null is left out, as is an
 * object all of whose values were; anything else is sent as written (`"$$x"` is the text
 * `$x`). Without `input`, an `openai` target
 * sends `OpenAiImages.defaultInput` and a `relay` target the client's request; `fal` and
 * `replicate` targets need one, since every model there takes its own input.
 *
 * A target may set `maxRunning`, the jobs it runs at once over every node (a whole number
 * from 1): they count against the provider's limit too, and one target has one limit in
 * every route that names it.
 *
 * A route may name a catalog id, a family or a model a job runs: `routableModels` says what
 * each name stands for, and `expandRoutes` turns the file's routes into the router's, one per
 * model a job runs.
 */
import { ModelCatalog, type Task } from "@mediagate/core"
import { Either, ParseResult, Schema } from "effect"
import * as Jsonc from "jsonc-parser"
import * as OpenAiImages from "./OpenAiImages.js"
import * as Relay from "./Relay.js"
import { type Route, type Target, targetName } from "./Router.js"

/** The values a template can name. */
export const variables: Readonly<Record<string, (job: Task.UpstreamJob, request: Task.TaskInput) => unknown>> = {
  prompt: (job) => job.prompt,
  n: (job) => job.n,
  ratio: (job) => job.ratio,
  resolution: (job) => job.resolution,
  width: (job) => job.width,
  height: (job) => job.height,
  duration: (job) => job.duration,
  mode: (job) => job.mode,
  model: (job) => job.model,
  imageUrls: (job) => job.imageUrls,
  imageUrl: (job) => job.imageUrls[0] ?? null,
  size: (job) => OpenAiImages.sizeOf(job)
}

/** `$params.<name>` (a model-specific parameter) and `$request.<field>` (the client's input) name those too. */
const lookup = (name: string): ((job: Task.UpstreamJob, request: Task.TaskInput) => unknown) | undefined => {
  if (name.startsWith("params.")) return (job) => job.params[name.slice("params.".length)] ?? null
  if (name.startsWith("request.")) return (_, request) => request[name.slice("request.".length)] ?? null
  return variables[name]
}

const Template: Schema.Schema<unknown> = Schema.Unknown

const TargetEntry = Schema.Struct({
  provider: Schema.NonEmptyTrimmedString,
  model: Schema.NonEmptyTrimmedString,
  input: Schema.optional(Schema.Record({ key: Schema.String, value: Template })),
  // Checked below, where the message can name the route and the target.
  maxRunning: Schema.optional(Schema.Unknown)
})

/** The largest `maxRunning` a target may set (as `MEDIAGATE_MAX_RUNNING_PER_PROVIDER`). */
const maxRunningLimit = 1_000_000

const RouteEntry = Schema.Struct({
  model: Schema.NonEmptyTrimmedString,
  targets: Schema.Array(TargetEntry).pipe(Schema.minItems(1, { message: () => "needs at least one target" }))
})

const File = Schema.Struct({ routes: Schema.Array(RouteEntry) })

/** A routes file that cannot be used: every problem, each with its line. */
export class RoutesFileError extends Error {}

/** Compiles a template; problems (unknown variables) are pushed with their path. */
const compile = (
  template: unknown,
  path: ReadonlyArray<string | number>,
  problems: Array<{ path: ReadonlyArray<string | number>; message: string }>
): ((job: Task.UpstreamJob, request: Task.TaskInput) => unknown) => {
  if (typeof template === "string" && template.startsWith("$")) {
    if (template.startsWith("$$")) return () => template.slice(1)
    const read = lookup(template.slice(1))
    if (read === undefined) {
      problems.push({ path, message: `unknown variable ${template}; use one of ${Object.keys(variables).map((v) => `$${v}`).join(", ")}, $params.<name> or $request.<field>` })
      return () => null
    }
    return read
  }
  if (Array.isArray(template)) {
    const items = template.map((item, i) => compile(item, [...path, i], problems))
    return (job, request) => items.map((item) => item(job, request))
  }
  if (typeof template === "object" && template !== null) {
    const entries = Object.entries(template).map(([key, value]) => [key, compile(value, [...path, key], problems)] as const)
    return (job, request) => {
      const out: Record<string, unknown> = {}
      for (const [key, value] of entries) {
        const v = value(job, request)
        if (v !== null && v !== undefined) out[key] = v
      }
      // An object whose every value was left out is left out too (an `image_size` without sizes).
      return entries.length > 0 && Object.keys(out).length === 0 && path.length > 0 ? null : out
    }
  }
  return () => template
}

export interface ParseOptions {
  /** The providers configured in this deployment (their keys are set). */
  readonly providers: ReadonlySet<string>
  /** Model names a route may serve (catalog ids, families, the models jobs run). */
  readonly models: ReadonlySet<string>
}

/** Parses and checks a routes file; fails with every problem, each naming its line. */
export const parse = (text: string, fileName: string, options: ParseOptions): Either.Either<ReadonlyArray<Route>, RoutesFileError> => {
  const syntax: Array<Jsonc.ParseError> = []
  const tree = Jsonc.parseTree(text, syntax, { allowTrailingComma: false, disallowComments: true })
  const lineOf = (offset: number) => text.slice(0, offset).split("\n").length
  const problems: Array<string> = syntax.map((error) => `${fileName}:${lineOf(error.offset)}: ${Jsonc.printParseErrorCode(error.error)}`)
  if (tree === undefined || problems.length > 0) {
    return Either.left(new RoutesFileError(problems.length > 0 ? problems.join("\n") : `${fileName}: empty file`))
  }
  /** The line of the value at `path`, or of the nearest enclosing value that exists. */
  const lineAt = (path: ReadonlyArray<string | number>) => {
    for (let n = path.length; n >= 0; n--) {
      const node = Jsonc.findNodeAtLocation(tree, path.slice(0, n) as Array<string | number>)
      if (node !== undefined) return lineOf(node.offset)
    }
    return 1
  }
  const at = (path: ReadonlyArray<PropertyKey>, message: string) =>
    `${fileName}:${lineAt(path as ReadonlyArray<string | number>)}: ${path.length === 0 ? "" : `${path.map(String).join(".")}: `}${message}`

  const decoded = Schema.decodeUnknownEither(File, { errors: "all", onExcessProperty: "error" })(Jsonc.getNodeValue(tree))
  if (Either.isLeft(decoded)) {
    const issues = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
    return Either.left(new RoutesFileError(issues.map((issue) => at(issue.path, issue.message)).join("\n")))
  }

  const routes: Array<Route> = []
  const seen = new Set<string>()
  /** The targets' running limits so far, with the route that set each. */
  const limits = new Map<string, { readonly maxRunning: number; readonly route: string }>()
  for (const [r, route] of decoded.right.routes.entries()) {
    if (!options.models.has(route.model)) problems.push(at(["routes", r, "model"], `no model of the catalog is named ${route.model}`))
    if (seen.has(route.model)) problems.push(at(["routes", r, "model"], `${route.model} has a route already`))
    seen.add(route.model)
    const targets: Array<Target> = []
    for (const [t, target] of route.targets.entries()) {
      const path = ["routes", r, "targets", t]
      if (!options.providers.has(target.provider)) {
        problems.push(at([...path, "provider"], `provider "${target.provider}" is not configured (configured: ${[...options.providers].join(", ") || "none"}; see docs/providers.md)`))
      }
      let input: Target["input"]
      if (target.input !== undefined) {
        const templateProblems: Array<{ path: ReadonlyArray<string | number>; message: string }> = []
        const make = compile(target.input, [...path, "input"], templateProblems)
        problems.push(...templateProblems.map((p) => at(p.path, p.message)))
        input = (job, request) => make(job, request) as Readonly<Record<string, unknown>>
      } else if (target.provider === "openai") {
        input = (job) => OpenAiImages.defaultInput(job, target.model)
      } else if (target.provider === "relay") {
        input = Relay.defaultInput
      } else {
        problems.push(at(path, `a ${target.provider} target needs an "input" template: every model there takes its own input`))
        input = () => ({})
      }
      const name = targetName(target)
      let maxRunning: number | undefined
      if (target.maxRunning !== undefined) {
        const value = target.maxRunning
        if (typeof value === "number" && Number.isInteger(value) && value >= 1 && value <= maxRunningLimit) {
          maxRunning = value
          const other = limits.get(name)
          if (other !== undefined && other.maxRunning !== value) {
            problems.push(at([...path, "maxRunning"], `target ${name} of the route of ${route.model} has maxRunning ${value}, but ${other.maxRunning} in the route of ${other.route}; a target has one limit`))
          } else {
            limits.set(name, { maxRunning: value, route: route.model })
          }
        } else {
          problems.push(at([...path, "maxRunning"], `target ${name} of the route of ${route.model}: maxRunning must be a whole number from 1 to ${maxRunningLimit} (got ${JSON.stringify(value)})`))
        }
      }
      targets.push({ provider: target.provider, model: target.model, input, ...(maxRunning === undefined ? {} : { maxRunning }) })
    }
    routes.push({ model: route.model, targets })
  }
  return problems.length > 0 ? Either.left(new RoutesFileError(problems.join("\n"))) : Either.right(routes)
}

/**
 * What each name a route may use stands for: the models the jobs run (the key the router
 * matches). A catalog id or a family stands for the models of its examples' jobs (with
 * their fallbacks); a job's model or `model/mode` stands for itself.
 */
export const routableModels = (): ReadonlyMap<string, ReadonlySet<string>> => {
  const names = new Map<string, Set<string>>()
  const add = (name: string, jobModel: string) => names.set(name, (names.get(name) ?? new Set()).add(jobModel))
  for (const spec of ModelCatalog.allModels) {
    for (const example of spec.examples) {
      const normalized = spec.normalize(example.input)
      if (Either.isLeft(normalized)) continue
      const { fallbackModel, mode, model } = normalized.right.job
      for (const jobModel of [model, ...(fallbackModel === null ? [] : [fallbackModel])]) {
        add(spec.id, jobModel)
        add(spec.family, jobModel)
        add(jobModel, jobModel)
      }
      add(`${model}/${mode}`, `${model}/${mode}`)
    }
  }
  return names
}

/**
 * The routes as the router matches them: a route named by catalog id or family serves each
 * model its jobs run, and a route that names a job's model itself wins over those.
 */
export const expandRoutes = (routes: ReadonlyArray<Route>, names: ReadonlyMap<string, ReadonlySet<string>>): ReadonlyArray<Route> => {
  const expanded = new Map<string, Route>()
  const exact = routes.filter((route) => names.get(route.model)?.size === 1 && names.get(route.model)!.has(route.model))
  for (const route of routes.filter((r) => !exact.includes(r))) {
    for (const model of names.get(route.model) ?? []) if (!expanded.has(model)) expanded.set(model, { ...route, model })
  }
  for (const route of exact) expanded.set(route.model, route)
  return [...expanded.values()]
}
