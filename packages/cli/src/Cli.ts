/**
 * `mediagate`: the API on the command line, on the Effect client of @mediagate/client.
 *
 *   mediagate run <model> --prompt <text> [--image <path|url>]... [--input <json>] [--out <dir>] [--json] [--no-wait] [--timeout <10m>] [--idempotency-key <key>]
 *   mediagate estimate <model> --prompt <text> [--input <json>] [--json]
 *   mediagate models [--json]
 *   mediagate get <task-id> [--json]
 *   mediagate cancel <task-id> [--json]
 *   mediagate list [--limit <20>] [--status <S1,S2>] [--model <id>] [--json]
 *
 * Each takes `--url` (else MEDIAGATE_URL, else http://127.0.0.1:8080) and `--key` (else
 * MEDIAGATE_API_KEY). A failure prints one line to stderr and exits 1; so does a task that
 * ends other than SUCCESS, and a mistyped command or option. `--help` (Help.ts) is plain text
 * unless stdout is a terminal and NO_COLOR is unset.
 */
import { Args, Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Path from "@effect/platform/Path"
import type { Client, InputOf, ModelId, Task } from "@mediagate/client"
import { MediagateClient, mediaFieldsOf } from "@mediagate/client"
import { Config, Console, Data, Duration, Effect, Option, Redacted, Stream } from "effect"
import * as CommandLine from "./CommandLine.js"
import * as Help from "./Help.js"
import * as Progress from "./ProgressLine.js"

/** A failure the user can act on: one line on stderr, exit 1. */
export class CliError extends Data.TaggedError("CliError")<{ readonly message: string }> {}

const url = Options.text("url").pipe(
  Options.withDescription("The server's address (default: $MEDIAGATE_URL, else http://127.0.0.1:8080)"),
  Options.withPseudoName("url"),
  Options.withDefault("http://127.0.0.1:8080"),
  Options.withFallbackConfig(Config.string("MEDIAGATE_URL"))
)

const key = Options.redacted("key").pipe(
  Options.withDescription("The API key (default: $MEDIAGATE_API_KEY)"),
  Options.withPseudoName("key"),
  Options.optional
)

const json = Options.boolean("json").pipe(Options.withDescription("Print the JSON document only (for scripts)"))

const taskId = Args.text({ name: "task-id" }).pipe(Args.withDescription("The taskId submit answered"))

/** Runs `use` with a client for `--url` and `--key` (or MEDIAGATE_API_KEY). */
const withClient = <A, E, R>(
  options: { readonly url: string; readonly key: Option.Option<Redacted.Redacted> },
  use: (client: Client) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const fromEnv = yield* Effect.orDie(Config.option(Config.redacted("MEDIAGATE_API_KEY")))
    const apiKey = Option.orElse(options.key, () => fromEnv).pipe(Option.filter((value) => Redacted.value(value).trim() !== ""))
    if (Option.isNone(apiKey)) return yield* new CliError({ message: "no API key: pass --key <key> or set MEDIAGATE_API_KEY" })
    if (!URL.canParse(options.url)) return yield* new CliError({ message: `--url must be an absolute URL such as http://127.0.0.1:8080 (got ${JSON.stringify(options.url)})` })
    const client = yield* MediagateClient.make({ baseUrl: options.url, apiKey: apiKey.value }).pipe(Effect.provide(FetchHttpClient.layer))
    return yield* use(client)
  })

const print = (asJson: boolean, value: unknown, text: () => string) => Console.log(asJson ? JSON.stringify(value, null, 2) : text())

const taskText = (task: Task) =>
  [
    `${task.taskId}  ${task.status}  ${String(task.input["model"] ?? "")}  ${task.created_at}`,
    ...(task.result?.urls ?? []),
    ...(task.error === null ? [] : [`error: ${task.error}${task.failure_reason === null ? "" : ` (${task.failure_reason})`}`])
  ].join("\n")

// run ---------------------------------------------------------------------------------------

const inputJson = Options.text("input").pipe(
  Options.withDescription(`The model's other input fields as a JSON object, e.g. '{"ratio":"16:9","n":2}'`),
  Options.withPseudoName("json"),
  Options.mapEffect((raw) => {
    try {
      const value: unknown = JSON.parse(raw)
      return typeof value === "object" && value !== null && !Array.isArray(value)
        ? Effect.succeed(value as Record<string, unknown>)
        : Effect.fail(ValidationError.invalidValue(HelpDoc.p("--input must be a JSON object")))
    } catch (error) {
      return Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--input is not valid JSON: ${(error as Error).message}`)))
    }
  }),
  Options.optional
)

const timeout = Options.text("timeout").pipe(
  Options.withDescription("Stop waiting after this long: 90s, 10m, 1h (the task goes on at the server)"),
  Options.withPseudoName("duration"),
  Options.mapEffect((raw) => {
    const match = /^(\d+)(s|m|h)$/.exec(raw)
    return match === null
      ? Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--timeout must be a number and a unit, such as 90s, 10m or 1h (got ${JSON.stringify(raw)})`)))
      : Effect.succeed(Duration.seconds(Number(match[1]) * ({ s: 1, m: 60, h: 3600 } as const)[match[2] as "s" | "m" | "h"]))
  }),
  Options.optional
)

const extensions: Readonly<Record<string, string>> = {
  "image/png": ".png",
  "image/jpeg": ".jpg",
  "image/webp": ".webp",
  "image/gif": ".gif",
  "video/mp4": ".mp4",
  "video/quicktime": ".mov"
}

/**
 * Downloads the task's result files into `dir` as `<taskId>-<n><ext>`; answers their paths.
 * Without the key: result URLs need none, and may be another host's.
 */
const download = (task: Task, dir: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const http = (yield* HttpClient.HttpClient).pipe(HttpClient.filterStatusOk)
    yield* fs.makeDirectory(dir, { recursive: true })
    const urls = task.result?.urls ?? []
    return yield* Effect.forEach(urls, (fileUrl, index) =>
      Effect.gen(function*() {
        const response = yield* http.execute(HttpClientRequest.get(fileUrl))
        const type = (response.headers["content-type"] ?? "").split(";")[0]!.trim()
        const fromUrl = path.extname(new URL(fileUrl).pathname)
        const file = path.join(dir, `${task.taskId}${urls.length === 1 ? "" : `-${index + 1}`}${fromUrl !== "" ? fromUrl : extensions[type] ?? ""}`)
        yield* response.stream.pipe(Stream.run(fs.sink(file)))
        return file
      }).pipe(Effect.mapError((error) => new CliError({ message: `downloading ${fileUrl} failed: ${error.message}` }))))
  }).pipe(Effect.provide(FetchHttpClient.layer))

/** The input of `run` and `estimate`: `--input`'s fields, and `--prompt` as input.prompt. */
const runInput = (options: { readonly input: Option.Option<Record<string, unknown>>; readonly prompt: Option.Option<string> }) => ({
  ...Option.getOrElse(options.input, () => ({})),
  ...Option.match(options.prompt, { onNone: () => ({}), onSome: (prompt) => ({ prompt }) })
})

/**
 * `--image`s (paths or http(s) URLs, in order) as the model's first media URL field
 * (imageUrls, images or mediaUrls), after any URLs `--input` gives there. The client uploads
 * the local paths and submits their URLs.
 */
const withImages = (model: string, input: Record<string, unknown>, images: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    if (images.length === 0) return input
    const field = mediaFieldsOf(model)[0]
    if (field === undefined) return yield* new CliError({ message: `--image: ${model} takes no image or video inputs (mediagate models lists the models)` })
    const given = input[field]
    const before = Array.isArray(given) ? given : given === undefined ? [] : [given]
    return { ...input, [field]: [...before, ...images] }
  })

const run = Command.make(
  "run",
  {
    model: Args.text({ name: "model" }).pipe(Args.withDescription("A model id, e.g. alpha-image-2/text-to-image (`mediagate models` lists them)")),
    prompt: Options.text("prompt").pipe(Options.withDescription("input.prompt: what to generate"), Options.optional),
    image: Options.text("image").pipe(
      Options.withDescription("An input image or video, a local file (uploaded first) or an http(s) URL, for the model's imageUrls (images, mediaUrls)."),
      Options.withPseudoName("path|url"),
      Options.repeated
    ),
    input: inputJson,
    out: Options.directory("out").pipe(Options.withDescription("Download the result files into this directory"), Options.withPseudoName("dir"), Options.optional),
    noWait: Options.boolean("no-wait").pipe(Options.withDescription("Submit and print the task id without waiting")),
    idempotencyKey: Options.text("idempotency-key").pipe(
      Options.withDescription("Submit with this Idempotency-Key: sent again within 24 hours with the same input, it answers the same task"),
      Options.withPseudoName("key"),
      Options.optional
    ),
    timeout,
    json,
    url,
    key
  },
  (options) =>
    withClient(options, (client) =>
      Effect.gen(function*() {
        const input = yield* withImages(options.model, runInput(options), options.image)
        // The model is only known at run time; the server checks the model and its input.
        const model = options.model as ModelId
        const typed = input as InputOf<ModelId>
        const submitOptions = Option.match(options.idempotencyKey, { onNone: () => ({}), onSome: (idempotencyKey) => ({ idempotencyKey }) })
        if (options.noWait) {
          const submitted = yield* client.submit(model, typed, submitOptions)
          return yield* options.json ? Effect.flatMap(client.get(submitted), (task) => print(true, task, () => "")) : Console.log(submitted)
        }
        const progress = yield* Progress.make()
        const task = yield* progress.around(
          client.run(model, typed, {
            ...submitOptions,
            onProgress: progress.onProgress,
            ...Option.match(options.timeout, { onNone: () => ({}), onSome: (limit) => ({ timeout: limit }) })
          })
        )
        const files = task.status === "SUCCESS" && Option.isSome(options.out) ? yield* download(task, options.out.value) : []
        yield* print(options.json, task, () => (files.length > 0 ? [taskText(task).split("\n")[0]!, ...files].join("\n") : taskText(task)))
        if (task.status !== "SUCCESS") {
          return yield* new CliError({
            message: `task ${task.taskId} ended ${task.status}${task.failure_reason === null ? "" : ` (${task.failure_reason})`}${task.error === null ? "" : `: ${task.error}`}`
          })
        }
      }))
).pipe(Command.withDescription("Submit a task, wait for its end (progress on stderr) and print it; --out downloads its files"))

// estimate ----------------------------------------------------------------------------------

const estimate = Command.make(
  "estimate",
  {
    model: Args.text({ name: "model" }).pipe(Args.withDescription("A model id, e.g. clip3 (`mediagate models` lists them)")),
    prompt: Options.text("prompt").pipe(Options.withDescription("input.prompt: what to generate"), Options.optional),
    input: inputJson,
    json,
    url,
    key
  },
  (options) =>
    withClient(options, (client) =>
      Effect.gen(function*() {
        // The same input as `run` builds; the server checks the model and its input.
        const input = runInput(options)
        const priced = yield* client.estimate(options.model as ModelId, input as InputOf<ModelId>)
        yield* print(options.json, priced, () =>
          [
            `${priced.model}  ${priced.priceUsd} USD (${priced.priceMicroUsd} micro-USD)`,
            ...priced.adjustments.map((change) => `${change.field}: ${JSON.stringify(change.requested)} -> ${JSON.stringify(change.applied)} (${change.reason})`),
            ...(priced.rejection === null ? [] : [`would fail at once (INVALID_PARAMETERS, not charged): ${priced.rejection}`])
          ].join("\n"))
      }))
).pipe(Command.withDescription("Price a task without submitting it: the price and what the model's rules would change; nothing is created or charged"))

// models, get, cancel, list -------------------------------------------------------------------

const models = Command.make("models", { json, url, key }, (options) =>
  withClient(options, (client) =>
    Effect.flatMap(client.models, (catalog) =>
      print(options.json, catalog, () => {
        const width = Math.max(...catalog.map((model) => model.id.length))
        return catalog.map((model) => `${model.id.padEnd(width)}  ${model.output}  ${model.modes.join(", ")}`).join("\n")
      })))).pipe(Command.withDescription("List the models (GET /api/v1/models)"))

const get = Command.make("get", { taskId, json, url, key }, (options) =>
  withClient(options, (client) => Effect.flatMap(client.get(options.taskId), (task) => print(options.json, task, () => taskText(task)))))
  .pipe(Command.withDescription("Show a task"))

const cancel = Command.make("cancel", { taskId, json, url, key }, (options) =>
  withClient(options, (client) => Effect.flatMap(client.cancel(options.taskId), (task) => print(options.json, task, () => taskText(task)))))
  .pipe(Command.withDescription("Cancel a task that has not ended"))

const list = Command.make(
  "list",
  {
    limit: Options.integer("limit").pipe(Options.withDescription("Tasks to show, 1 to 100 (default: 20)"), Options.withPseudoName("n"), Options.withDefault(20)),
    status: Options.text("status").pipe(
      Options.withDescription("Only tasks in these statuses, separated by commas: SUCCESS,FAILURE"),
      Options.withPseudoName("statuses"),
      Options.optional
    ),
    model: Options.text("model").pipe(Options.withDescription("Only tasks of this model"), Options.withPseudoName("model"), Options.optional),
    json,
    url,
    key
  },
  (options) =>
    withClient(options, (client) =>
      Effect.flatMap(
        client.list({
          limit: options.limit,
          // The server checks the statuses and says which it takes.
          ...Option.match(options.status, { onNone: () => ({}), onSome: (status) => ({ status: status.split(",") as Array<Task["status"]> }) }),
          ...Option.match(options.model, { onNone: () => ({}), onSome: (model) => ({ model }) })
        }),
        (page) =>
        print(options.json, page, () =>
          page.tasks.length === 0 ? "no tasks" : page.tasks.map((task) => taskText(task).split("\n")[0]).join("\n"))))
).pipe(Command.withDescription("List your tasks, newest first"))

const commands = [run, estimate, models, get, cancel, list] as const

/** The `mediagate` command. */
export const command = Command.make("mediagate").pipe(
  Command.withDescription("mediagate on the command line: run a model and download its files, price a task, list models, get, cancel and list tasks"),
  Command.withSubcommands(commands)
)

const version = "0.1.0"

const parseAndRun = Command.run(command, { name: "mediagate", version })

/** What `--help` shows, read once from the commands. */
export const help: Help.ProgramHelp = Help.programHelp("mediagate", command, commands)

/**
 * Runs the command line `argv` (as process.argv: node and the script first). Help and
 * mistyped commands and options are answered here; the rest is @effect/cli's to parse.
 */
export const cli = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const reading = CommandLine.read(help, argv.slice(2))
    switch (reading._tag) {
      case "Help": {
        const noColor = yield* Effect.orDie(Config.option(Config.string("NO_COLOR")))
        const columns = process.stdout.columns ?? 0
        // Lines as wide as the terminal, up to 100; 80 when it is not one (or says 0 columns).
        const style = { color: Help.wantsColor(process.stdout.isTTY, Option.getOrUndefined(noColor)), width: columns >= 40 ? Math.min(columns, 100) : 80 }
        return yield* Console.log(
          reading.command === undefined ? Help.renderProgram(help, version, style) : Help.renderCommand(help.program, reading.command, style)
        )
      }
      case "Mistake":
        return yield* new CliError({ message: reading.message })
      case "Parse":
        return yield* parseAndRun(argv)
    }
  })

/** One line for a failure: the server's `msg`, or what went wrong. */
export const describeFailure = (error: unknown): string => {
  if (typeof error === "object" && error !== null && "_tag" in error) {
    if (error._tag === "MediagateError") {
      const failure = error as unknown as { readonly msg: string; readonly status: number }
      return failure.status === 401 ? `${failure.msg} (check --key or MEDIAGATE_API_KEY)` : failure.msg
    }
  }
  return (error as { message?: string }).message ?? String(error)
}
