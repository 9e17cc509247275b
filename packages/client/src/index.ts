/** The Effect client derived from the HttpApi contract: `MediagateClient.make`, `layer`, `layerConfig`. */
export * as MediagateClient from "./MediagateClient.js"
export type { Client, ClientOptions, Estimate, ListOptions, SubmitOptions, TaskPage } from "./MediagateClient.js"
/** The client's errors. */
export { type ClientError, LocalFileError, MediagateError, RunTimeout, TransportError } from "./CallErrors.js"
/** Files as inputs: what `upload` takes and answers, and the input types that take files. */
export { type FileInput, isRemoteUrl, type MediaField, mediaFieldsOf, type Upload, type WithFiles } from "./FileInputs.js"
/** Model ids and their input types. */
export { type CatalogSpec, type InputOf, isModelId, type ModelId, modelIds } from "./Models.js"
/** How `run` waits. */
export { pollBackoff, type RunOptions, terminalStatuses, type Update } from "./Run.js"
/** The promise facade. */
export { Mediagate, type PromiseRunOptions } from "./PromiseClient.js"
/** A receiver's check of a mediagate callback (Standard Webhooks signature), and why it refuses one. */
export { CallbackVerificationError, verifyCallback, verifyCallbackEvent } from "@mediagate/core"
import type { Task as TaskNs } from "@mediagate/core"
/** A task as the query endpoint answers it. */
export type Task = TaskNs.Task
