/** Result files on the local file system. */
export * as FileMediaStore from "./FileMediaStore.js"
