/**
 * Configuration of the standalone server from the environment (DESIGN.md section 7).
 */
import { Config, Option } from "effect"

/** The simulator's latency profiles. */
export type SimulatorProfile = "instant" | "demo" | "realistic"

/** Everything the standalone server reads from its environment. */
export interface ServerConfig {
  readonly port: number
  readonly host: string
  readonly publicUrl: string
  readonly apiKey: Option.Option<string>
  readonly allowPrivateUrls: boolean
  readonly upstream: "simulator"
  readonly simulatorProfile: SimulatorProfile
  readonly databaseUrl: string
  readonly mediaDir: string
}

/** Reads MEDIAGATE_* variables. */
export const serverConfig: Config.Config<ServerConfig> = Config.all({
  port: Config.port("MEDIAGATE_PORT").pipe(Config.withDefault(8080)),
  host: Config.string("MEDIAGATE_HOST").pipe(Config.withDefault("127.0.0.1")),
  publicUrl: Config.option(Config.string("MEDIAGATE_PUBLIC_URL")),
  apiKey: Config.option(Config.nonEmptyString("MEDIAGATE_API_KEY")),
  allowPrivateUrls: Config.boolean("MEDIAGATE_ALLOW_PRIVATE_URLS").pipe(Config.withDefault(false)),
  upstream: Config.literal("simulator")("MEDIAGATE_UPSTREAM").pipe(Config.withDefault("simulator" as const)),
  simulatorProfile: Config.literal("instant", "demo", "realistic")("MEDIAGATE_SIMULATOR_PROFILE").pipe(
    Config.withDefault("demo" as const)
  ),
  databaseUrl: Config.string("MEDIAGATE_DATABASE_URL").pipe(Config.withDefault("sqlite:./data/mediagate.db")),
  mediaDir: Config.string("MEDIAGATE_MEDIA_DIR").pipe(Config.withDefault("./data/media"))
}).pipe(
  Config.map((config) => ({
    ...config,
    publicUrl: Option.getOrElse(
      config.publicUrl,
      () => `http://${config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host}:${config.port}`
    ).replace(/\/+$/, "")
  }))
)
