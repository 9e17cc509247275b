/** MP4 files for simulated videos. */
export * as Mp4 from "./Mp4.js"
/** PNG encoding and reading. */
export * as Png from "./Png.js"
/** Moderation driven by prompt markers. */
export * as SimulatedModeration from "./SimulatedModeration.js"
/** The simulated upstream. */
export * as Simulator from "./Simulator.js"
/** A circuit breaker per provider target, per process (not shared between nodes). */
export * as CircuitBreaker from "./CircuitBreaker.js"
/** fal's queue API. */
export * as Fal from "./Fal.js"
/** An OpenAI-compatible images API (synchronous). */
export * as OpenAiImages from "./OpenAiImages.js"
/** An OpenAI-compatible moderation API as the Moderation service. */
export * as OpenAiModeration from "./OpenAiModeration.js"
/** What the provider adapters share: JSON calls and the classification of failures. */
export * as ProviderHttp from "./ProviderHttp.js"
/** Progress as providers report it: queue positions, bounded log lines, percents from progress bars. */
export * as Progress from "./ProgressParsing.js"
/** A relay to another gateway of this spec. */
export * as Relay from "./Relay.js"
/** Replicate predictions. */
export * as Replicate from "./Replicate.js"
/** Routes from catalog models to provider targets, with failover. */
export * as Router from "./Router.js"
/** The standalone server's routes file (JSON), checked with line numbers. */
export * as RoutesFile from "./RoutesFile.js"
