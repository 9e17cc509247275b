/** The task lifecycle engine. */
export * as Engine from "./Engine.js"
