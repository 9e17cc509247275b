/** The standard composition: services, engine, deliverer and HTTP over the host's backends. */
export * as Mediagate from "./Mediagate.js"
