/** The standard composition: services, engine, deliverer and HTTP over the host's backends. */
export * as Mediagate from "./Mediagate.js"

/** Where a deployment keeps its data: everything in memory, or SQLite / PostgreSQL with files on disk. */
export * as Backends from "./Backends.js"

/** The services of a deployment over chosen backends: simulator or providers, moderation, callbacks, media rules. */
export * as Deployment from "./Deployment.js"
