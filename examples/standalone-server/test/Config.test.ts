import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Either, Option, Redacted } from "effect"
import { configErrorLines, listeningOn, serverConfig } from "../src/Config.js"
import { adminKeyClash } from "../src/ConfigVariables.js"
import * as Logging from "../src/Logging.js"

const read = (env: Record<string, string>) =>
  Effect.either(Effect.withConfigProvider(serverConfig, ConfigProvider.fromMap(new Map(Object.entries(env)))))

/** The lines a start with this environment would print, or the config it would run with. */
const problems = (env: Record<string, string>) =>
  Effect.map(read(env), Either.match({ onLeft: configErrorLines, onRight: () => [] }))

describe("serverConfig", () => {
  it.effect("defaults when nothing is set", () =>
    Effect.gen(function*() {
      const config = Either.getOrThrow(yield* read({}))
      expect(config).toMatchObject({
        port: 8080,
        host: "127.0.0.1",
        publicUrl: "http://127.0.0.1:8080",
        allowPrivateUrls: false,
        upstream: "simulator",
        simulatorProfile: "demo",
        databaseUrl: "sqlite:./data/mediagate.db",
        mediaDir: "./data/media"
      })
      expect(Duration.toMillis(config.lease)).toBe(15_000)
      expect(Duration.toMillis(config.shutdownGrace)).toBe(10_000)
      expect(Option.isNone(config.apiKey)).toBe(true)
    }))

  it.effect("valid values are read", () =>
    Effect.gen(function*() {
      const config = Either.getOrThrow(yield* read({
        MEDIAGATE_PORT: "9000",
        MEDIAGATE_HOST: "0.0.0.0",
        MEDIAGATE_PUBLIC_URL: "https://media.example.com/",
        MEDIAGATE_API_KEY: "k",
        MEDIAGATE_ALLOW_PRIVATE_URLS: "true",
        MEDIAGATE_SIMULATOR_PROFILE: "realistic",
        MEDIAGATE_DATABASE_URL: "postgres://u@127.0.0.1:5432/db"
      }))
      expect(config).toMatchObject({
        port: 9000,
        publicUrl: "https://media.example.com",
        allowPrivateUrls: true,
        simulatorProfile: "realistic",
        databaseUrl: "postgres://u@127.0.0.1:5432/db"
      })
      expect(Option.getOrThrow(config.apiKey)).toBe("k")
    }))

  it.effect("each bad variable is one line naming it, the allowed values and what it got", () =>
    Effect.gen(function*() {
      expect(yield* problems({ MEDIAGATE_SIMULATOR_PROFILE: "fast" })).toEqual([
        `MEDIAGATE_SIMULATOR_PROFILE must be one of instant, demo, realistic (got "fast")`
      ])
      expect(yield* problems({ MEDIAGATE_PORT: "80a" })).toEqual([
        `MEDIAGATE_PORT must be a whole number from 0 to 65535, 0 for any free port (got "80a")`
      ])
      expect(yield* problems({ MEDIAGATE_PORT: "70000" })).toEqual([
        `MEDIAGATE_PORT must be a whole number from 0 to 65535, 0 for any free port (got "70000")`
      ])
      expect(yield* problems({ MEDIAGATE_ALLOW_PRIVATE_URLS: "maybe" })).toEqual([
        `MEDIAGATE_ALLOW_PRIVATE_URLS must be true or false (got "maybe")`
      ])
      expect(yield* problems({ MEDIAGATE_UPSTREAM: "fal" })).toEqual([
        `MEDIAGATE_UPSTREAM must be simulator; real providers are set up with MEDIAGATE_ROUTES (docs/providers.md) (got "fal")`
      ])
      expect(yield* problems({ MEDIAGATE_DATABASE_URL: "mysql://x" })).toEqual([
        `MEDIAGATE_DATABASE_URL must be sqlite:<path>, postgres://... or memory (got "mysql://x")`
      ])
      expect(yield* problems({ MEDIAGATE_PUBLIC_URL: "media.example.com" })).toEqual([
        `MEDIAGATE_PUBLIC_URL must be an absolute http:// or https:// URL (got "media.example.com")`
      ])
      expect(yield* problems({ MEDIAGATE_API_KEY: "" })).toEqual([
        `MEDIAGATE_API_KEY must not be empty (unset it to have a key generated)`
      ])
    }))

  it.effect("MEDIAGATE_PORT=0: the default public URL names the port the server got once it listens; a given one stays", () =>
    Effect.gen(function*() {
      const listening = (env: Record<string, string>) =>
        Effect.map(read({ MEDIAGATE_PORT: "0", ...env }), (config) => {
          const bound = listeningOn(Either.getOrThrow(config), 43_210)
          return [bound.port, bound.publicUrl]
        })
      expect(yield* listening({})).toEqual([43_210, "http://127.0.0.1:43210"])
      expect(yield* listening({ MEDIAGATE_HOST: "0.0.0.0" })).toEqual([43_210, "http://127.0.0.1:43210"])
      expect(yield* listening({ MEDIAGATE_PUBLIC_URL: "https://media.example.com" })).toEqual([43_210, "https://media.example.com"])
      expect(yield* problems({ MEDIAGATE_PORT: "-1" })).toEqual([
        `MEDIAGATE_PORT must be a whole number from 0 to 65535, 0 for any free port (got "-1")`
      ])
    }))

  it.effect("the lease and the grace period are durations with a unit, within bounds", () =>
    Effect.gen(function*() {
      const durations = (lease: string, grace: string) =>
        Effect.map(read({ MEDIAGATE_LEASE: lease, MEDIAGATE_SHUTDOWN_GRACE: grace }), (config) => {
          const { lease, shutdownGrace } = Either.getOrThrow(config)
          return [Duration.toMillis(lease), Duration.toMillis(shutdownGrace)]
        })
      expect(yield* durations("3s", "0s")).toEqual([3_000, 0])
      expect(yield* durations("1500ms", "2m")).toEqual([1_500, 120_000])
      expect(yield* durations("60m", "1.5s")).toEqual([3_600_000, 1_500])
      const rule = (name: string, range: string, got: string) =>
        `${name} must be a duration from ${range}, such as 500ms, 10s or 2m (got "${got}")`
      expect(yield* problems({ MEDIAGATE_LEASE: "15" })).toEqual([rule("MEDIAGATE_LEASE", "1s to 60m", "15")])
      expect(yield* problems({ MEDIAGATE_LEASE: "500ms" })).toEqual([rule("MEDIAGATE_LEASE", "1s to 60m", "500ms")])
      expect(yield* problems({ MEDIAGATE_LEASE: "2h" })).toEqual([rule("MEDIAGATE_LEASE", "1s to 60m", "2h")])
      expect(yield* problems({ MEDIAGATE_SHUTDOWN_GRACE: "-1s" })).toEqual([rule("MEDIAGATE_SHUTDOWN_GRACE", "0s to 10m", "-1s")])
      expect(yield* problems({ MEDIAGATE_SHUTDOWN_GRACE: "11m" })).toEqual([rule("MEDIAGATE_SHUTDOWN_GRACE", "0s to 10m", "11m")])
    }))

  it.effect("the media retention is unset by default, or a duration from 1m to 3650d", () =>
    Effect.gen(function*() {
      const retention = (env: Record<string, string>) =>
        Effect.map(read(env), (config) => Option.map(Either.getOrThrow(config).mediaRetention, Duration.toMillis))
      expect(yield* retention({})).toEqual(Option.none())
      expect(yield* retention({ MEDIAGATE_MEDIA_RETENTION: "30d" })).toEqual(Option.some(30 * 86_400_000))
      expect(yield* retention({ MEDIAGATE_MEDIA_RETENTION: "90m" })).toEqual(Option.some(90 * 60_000))
      const rule = (got: string) => `MEDIAGATE_MEDIA_RETENTION must be a duration from 1m to 3650d, such as 500ms, 10s or 2m (got "${got}")`
      expect(yield* problems({ MEDIAGATE_MEDIA_RETENTION: "30s" })).toEqual([rule("30s")])
      expect(yield* problems({ MEDIAGATE_MEDIA_RETENTION: "forever" })).toEqual([rule("forever")])
    }))

  it.effect("MEDIAGATE_MEDIA_URL: unset by default; s3://bucket/prefix with the client from AWS_*; never with MEDIAGATE_MEDIA_DIR", () =>
    Effect.gen(function*() {
      const bucket = (env: Record<string, string>) => Effect.map(read(env), (config) => Either.getOrThrow(config).mediaBucket)
      expect(yield* bucket({})).toEqual(Option.none())
      expect(yield* bucket({ MEDIAGATE_MEDIA_URL: "s3://results/mediagate/" })).toEqual(
        Option.some({ bucket: "results", prefix: "mediagate/", client: { region: "us-east-1" }, serve: "proxy" })
      )
      expect(yield* bucket({ MEDIAGATE_MEDIA_URL: "s3://results", AWS_REGION: "auto", AWS_ENDPOINT_URL_S3: "https://x.r2.cloudflarestorage.com" })).toEqual(
        Option.some({ bucket: "results", prefix: "", client: { region: "auto", endpoint: "https://x.r2.cloudflarestorage.com" }, serve: "proxy" })
      )
      // The folder's default stays for a server that keeps files on disk.
      expect(Either.getOrThrow(yield* read({ MEDIAGATE_MEDIA_URL: "s3://results" })).mediaDir).toBe("./data/media")
      expect(yield* problems({ MEDIAGATE_MEDIA_URL: "results" })).toEqual([`MEDIAGATE_MEDIA_URL must be s3://bucket or s3://bucket/prefix (got "results")`])
      expect(yield* problems({ MEDIAGATE_MEDIA_URL: "s3://Results" })).toEqual([`MEDIAGATE_MEDIA_URL names a bucket S3 does not allow ("Results") (got "s3://Results")`])
      expect(Option.map(yield* bucket({ MEDIAGATE_MEDIA_URL: "s3://results", MEDIAGATE_MEDIA_REDIRECT: "presigned" }), ({ serve }) => serve)).toEqual(
        Option.some("presigned")
      )
      expect(Option.map(yield* bucket({ MEDIAGATE_MEDIA_URL: "s3://results", MEDIAGATE_MEDIA_REDIRECT: "off" }), ({ serve }) => serve)).toEqual(
        Option.some("proxy")
      )
      expect(yield* problems({ MEDIAGATE_MEDIA_REDIRECT: "presigned" })).toEqual([
        "MEDIAGATE_MEDIA_REDIRECT needs MEDIAGATE_MEDIA_URL: only a bucket can serve its files itself"
      ])
      expect(yield* problems({ MEDIAGATE_MEDIA_URL: "s3://results", MEDIAGATE_MEDIA_REDIRECT: "yes" })).toEqual([
        `MEDIAGATE_MEDIA_REDIRECT must be one of off, presigned (got "yes")`
      ])
      expect(yield* problems({ MEDIAGATE_MEDIA_URL: "s3://results", MEDIAGATE_MEDIA_DIR: "/var/media" })).toEqual([
        "MEDIAGATE_MEDIA_URL and MEDIAGATE_MEDIA_DIR are both set: files go to a bucket or to a folder, unset one"
      ])
    }))

  it.effect("running limits are whole numbers; deadlines are family=duration pairs of known families", () =>
    Effect.gen(function*() {
      const defaults = Either.getOrThrow(yield* read({}))
      expect([defaults.maxRunning, defaults.maxRunningPerAccount, defaults.deadlines]).toEqual([500, 100, {}])
      const set = Either.getOrThrow(
        yield* read({ MEDIAGATE_MAX_RUNNING: "2000", MEDIAGATE_MAX_RUNNING_PER_ACCOUNT: "20", MEDIAGATE_DEADLINES: "motion=4h, clip3=20m" })
      )
      expect([set.maxRunning, set.maxRunningPerAccount]).toEqual([2000, 20])
      expect(Object.entries(set.deadlines).map(([family, after]) => [family, Duration.toMillis(after)])).toEqual([
        ["motion", 14_400_000],
        ["clip3", 1_200_000]
      ])
      expect(yield* problems({ MEDIAGATE_MAX_RUNNING: "0" })).toEqual([
        `MEDIAGATE_MAX_RUNNING must be a whole number from 1 to 1000000 (got "0")`
      ])
      expect(yield* problems({ MEDIAGATE_MAX_RUNNING_PER_ACCOUNT: "ten" })).toEqual([
        `MEDIAGATE_MAX_RUNNING_PER_ACCOUNT must be a whole number from 1 to 1000000 (got "ten")`
      ])
      expect((yield* problems({ MEDIAGATE_DEADLINES: "motoin=4h" }))[0]).toMatch(/^MEDIAGATE_DEADLINES names an unknown model family "motoin"; families: .*motion/)
      expect(yield* problems({ MEDIAGATE_DEADLINES: "motion=forever" })).toEqual([
        `MEDIAGATE_DEADLINES must be family=duration pairs such as motion=4h,clip3=20m, each from 10s to 48h (got "motion=forever")`
      ])
    }))

  it.effect("provider limits: one number for every provider, or provider=number pairs with * for the rest", () =>
    Effect.gen(function*() {
      expect(Either.getOrThrow(yield* read({})).maxRunningPerProvider).toEqual({ "*": 100 })
      expect(Either.getOrThrow(yield* read({ MEDIAGATE_MAX_RUNNING_PER_PROVIDER: "40" })).maxRunningPerProvider).toEqual({ "*": 40 })
      expect(Either.getOrThrow(yield* read({ MEDIAGATE_MAX_RUNNING_PER_PROVIDER: "fal=20, *=50" })).maxRunningPerProvider).toEqual({
        fal: 20,
        "*": 50
      })
      expect(yield* problems({ MEDIAGATE_MAX_RUNNING_PER_PROVIDER: "fla=20" })).toEqual([
        `MEDIAGATE_MAX_RUNNING_PER_PROVIDER names an unknown provider "fla"; providers: fal, replicate, openai, relay, *`
      ])
      expect(yield* problems({ MEDIAGATE_MAX_RUNNING_PER_PROVIDER: "fal=0" })).toEqual([
        `MEDIAGATE_MAX_RUNNING_PER_PROVIDER must be a number from 1 to 1000000, or provider=number pairs such as fal=20,*=100 (got "fal=0")`
      ])
    }))

  it.effect("Replicate's webhook events: completed only unless set; a subset of start, output, logs, completed that includes completed", () =>
    Effect.gen(function*() {
      const replicate = (env: Record<string, string>) =>
        Effect.map(read({ REPLICATE_API_TOKEN: "r8_x", ...env }), (config) => Option.getOrThrow(Either.getOrThrow(config).providers.replicate))
      expect((yield* replicate({})).webhookEvents).toEqual(Option.none())
      expect((yield* replicate({ MEDIAGATE_REPLICATE_WEBHOOK_EVENTS: "completed, logs" })).webhookEvents).toEqual(Option.some(["logs", "completed"]))
      expect((yield* replicate({ MEDIAGATE_REPLICATE_WEBHOOK_EVENTS: "completed,output,start,logs,logs" })).webhookEvents).toEqual(
        Option.some(["start", "output", "logs", "completed"])
      )
      const rule = "must be a comma-separated list of start, output, logs, completed that includes completed, such as logs,completed"
      expect(yield* problems({ REPLICATE_API_TOKEN: "r8_x", MEDIAGATE_REPLICATE_WEBHOOK_EVENTS: "logs" })).toEqual([
        `MEDIAGATE_REPLICATE_WEBHOOK_EVENTS ${rule} (got "logs")`
      ])
      expect(yield* problems({ REPLICATE_API_TOKEN: "r8_x", MEDIAGATE_REPLICATE_WEBHOOK_EVENTS: "logs,complete" })).toEqual([
        `MEDIAGATE_REPLICATE_WEBHOOK_EVENTS ${rule} (got "logs,complete")`
      ])
      expect(yield* problems({ REPLICATE_API_TOKEN: "r8_x", MEDIAGATE_REPLICATE_WEBHOOK_EVENTS: " " })).toEqual([
        `MEDIAGATE_REPLICATE_WEBHOOK_EVENTS ${rule} (got " ")`
      ])
    }))

  it.effect("moderation: local rules by default, failing closed; openai needs its key; a rules file only for local", () =>
    Effect.gen(function*() {
      const defaults = Either.getOrThrow(yield* read({})).moderation
      expect(defaults).toEqual({ moderator: { _tag: "local", rulesFile: Option.none() }, failOpen: false })
      const openai = Either.getOrThrow(yield* read({
        MEDIAGATE_MODERATION: "openai",
        MEDIAGATE_MODERATION_KEY: "sk-x",
        MEDIAGATE_MODERATION_URL: "http://127.0.0.1:9000",
        MEDIAGATE_MODERATION_FAIL_OPEN: "yes"
      })).moderation
      expect(openai).toEqual({
        moderator: { _tag: "openai", key: "sk-x", baseUrl: Option.some("http://127.0.0.1:9000"), model: Option.none() },
        failOpen: true
      })
      expect(yield* problems({ MEDIAGATE_MODERATION: "openai" })).toEqual([
        "MEDIAGATE_MODERATION_KEY must be set when MEDIAGATE_MODERATION is openai"
      ])
      expect(yield* problems({ MEDIAGATE_MODERATION: "none", MEDIAGATE_MODERATION_RULES: "/x.json" })).toEqual([
        "MEDIAGATE_MODERATION_RULES is read only when MEDIAGATE_MODERATION is local (it is none)"
      ])
      expect(yield* problems({ MEDIAGATE_MODERATION: "strict" })).toEqual([
        `MEDIAGATE_MODERATION must be one of local, openai, none (got "strict")`
      ])
      expect(yield* problems({ MEDIAGATE_MODERATION_FAIL_OPEN: "maybe" })).toEqual([
        `MEDIAGATE_MODERATION_FAIL_OPEN must be true or false (got "maybe")`
      ])
    }))

  it.effect("rate limits: 50 a second per key with a burst of twice that by default, 1 s for the shared buckets; off turns them off", () =>
    Effect.gen(function*() {
      expect(Either.getOrThrow(yield* read({})).rateLimit).toEqual(Option.some({ perSecond: 50, burst: 100, timeout: Duration.seconds(1) }))
      expect(
        Either.getOrThrow(yield* read({ MEDIAGATE_RATE_LIMIT: "5", MEDIAGATE_RATE_LIMIT_BURST: "8", MEDIAGATE_RATE_LIMIT_SHARED_TIMEOUT: "250ms" })).rateLimit
      ).toEqual(Option.some({ perSecond: 5, burst: 8, timeout: Duration.millis(250) }))
      expect(yield* problems({ MEDIAGATE_RATE_LIMIT_SHARED_TIMEOUT: "0s" })).toEqual([
        `MEDIAGATE_RATE_LIMIT_SHARED_TIMEOUT must be a duration from 10ms to 1m, such as 500ms, 10s or 2m (got "0s")`
      ])
      expect(Either.getOrThrow(yield* read({ MEDIAGATE_RATE_LIMIT: "off" })).rateLimit).toEqual(Option.none())
      expect(yield* problems({ MEDIAGATE_RATE_LIMIT: "fast" })).toEqual([
        `MEDIAGATE_RATE_LIMIT must be requests a second per key, a whole number from 1, or off (got "fast")`
      ])
    }))

  it.effect("MEDIAGATE_ADMIN_KEY: unset by default; at least 32 characters with no spaces, never echoed in the message", () =>
    Effect.gen(function*() {
      expect(Option.isNone(Either.getOrThrow(yield* read({})).adminKey)).toBe(true)
      const key = "mga_0123456789abcdefghijABCDEFGHIJ0123"
      const config = Either.getOrThrow(yield* read({ MEDIAGATE_ADMIN_KEY: key }))
      expect(Option.map(config.adminKey, Redacted.value)).toEqual(Option.some(key))
      // Redacted: a log of the configuration does not show it.
      expect(String(Option.getOrThrow(config.adminKey))).not.toContain(key)
      for (const bad of ["short-admin-key", `${key.slice(0, 20)} ${key.slice(20)}`, ""]) {
        const lines = yield* problems({ MEDIAGATE_ADMIN_KEY: bad })
        expect(lines).toEqual(["MEDIAGATE_ADMIN_KEY must be at least 32 characters with no spaces (npm run admin -- key create --admin makes one)"])
      }
    }))

  it("MEDIAGATE_ADMIN_KEY must differ from MEDIAGATE_API_KEY: an admin key is never a customer key", () => {
    const key = "k".repeat(40)
    expect(adminKeyClash({ apiKey: Option.some(key), adminKey: Option.some(Redacted.make(key)) })).toEqual(
      Option.some("MEDIAGATE_ADMIN_KEY must differ from MEDIAGATE_API_KEY: an admin key is never a customer key")
    )
    expect(adminKeyClash({ apiKey: Option.some(key), adminKey: Option.some(Redacted.make(`${key}x`)) })).toEqual(Option.none())
    expect(adminKeyClash({ apiKey: Option.none(), adminKey: Option.some(Redacted.make(key)) })).toEqual(Option.none())
  })

  it.effect("every bad variable is reported, not only the first", () =>
    Effect.gen(function*() {
      expect(yield* problems({ MEDIAGATE_PORT: "x", MEDIAGATE_SIMULATOR_PROFILE: "fast" })).toEqual([
        `MEDIAGATE_PORT must be a whole number from 0 to 65535, 0 for any free port (got "x")`,
        `MEDIAGATE_SIMULATOR_PROFILE must be one of instant, demo, realistic (got "fast")`
      ])
    }))

  it.effect("a long value is quoted shortened", () =>
    Effect.gen(function*() {
      const [line] = yield* problems({ MEDIAGATE_SIMULATOR_PROFILE: "x".repeat(500) })
      expect(line!.length).toBeLessThan(200)
      expect(line).toContain("…")
    }))

  it.effect("logs: logfmt at info by default; MEDIAGATE_LOG_FORMAT and MEDIAGATE_LOG_LEVEL are checked", () =>
    Effect.gen(function*() {
      expect(Either.getOrThrow(yield* read({}))).toMatchObject({ logFormat: "logfmt", logLevel: "info", metrics: false })
      expect(Either.getOrThrow(yield* read({ MEDIAGATE_LOG_FORMAT: "json", MEDIAGATE_LOG_LEVEL: "warning", MEDIAGATE_METRICS: "true" })))
        .toMatchObject({ logFormat: "json", logLevel: "warning", metrics: true })
      expect(yield* problems({ MEDIAGATE_LOG_FORMAT: "xml" })).toEqual([
        `MEDIAGATE_LOG_FORMAT must be one of logfmt, json (got "xml")`
      ])
      expect(yield* problems({ MEDIAGATE_LOG_LEVEL: "verbose" })).toEqual([
        `MEDIAGATE_LOG_LEVEL must be one of debug, info, warning, error, none (got "verbose")`
      ])
      expect(yield* problems({ MEDIAGATE_METRICS: "sometimes" })).toEqual([
        `MEDIAGATE_METRICS must be true or false (got "sometimes")`
      ])
    }))

  it.effect("the logging layer writes JSON lines at the configured level and above", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const original = console.log
      console.log = (line: unknown) => void lines.push(String(line))
      const logAll = Effect.all([
        Effect.logDebug("debug line"),
        Effect.logInfo("info line"),
        Effect.logWarning("warning line").pipe(Effect.annotateLogs("taskId", "t-1"))
      ])
      yield* logAll.pipe(Effect.provide(Logging.layer({ logFormat: "json", logLevel: "info" })), Effect.ensuring(Effect.sync(() => (console.log = original))))
      const parsed = lines.map((line) => JSON.parse(line) as { message: unknown; logLevel: string; annotations: Record<string, unknown> })
      expect(parsed.map((line) => [line.logLevel, line.message])).toEqual([["INFO", "info line"], ["WARN", "warning line"]])
      expect(parsed[1]!.annotations).toEqual({ taskId: "t-1" })
      lines.length = 0
      console.log = (line: unknown) => void lines.push(String(line))
      yield* logAll.pipe(Effect.provide(Logging.layer({ logFormat: "logfmt", logLevel: "none" })), Effect.ensuring(Effect.sync(() => (console.log = original))))
      expect(lines).toEqual([])
    }))
})
