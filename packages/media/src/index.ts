/** Result files on the local file system. */
export * as FileMediaStore from "./FileMediaStore.js"
/** Requests to third parties on node:http, pinned to checked addresses. */
export * as NodeOutbound from "./NodeOutbound.js"
/** Host names to addresses with the operating system's resolver. */
export * as NodeResolver from "./NodeResolver.js"
