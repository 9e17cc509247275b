/**
 * The MediaStore contract (packages/media/test/MediaStoreContract.ts), one suite run unchanged
 * against the memory store, the file store and the S3 store, the last twice: on s3rver started
 * on loopback by this file, and on a bucket of the S3 server at MEDIAGATE_TEST_S3_URL, which
 * checks SigV4 signatures as s3rver does not (Ceph RGW: scripts/ceph/start.sh; skipped when
 * it is not set). Each test gets a store of its own: a fresh store, folder or prefix. The
 * uploads' contract (putStream and remove, packages/media/test/StreamStoreContract.ts) runs
 * on the same four, listing what a store leaves behind: the file store's folder, the S3
 * store's prefix and its spool folder.
 */
import { ListObjectsV2Command } from "@aws-sdk/client-s3"
import { afterAll, beforeAll } from "@effect/vitest"
import { Ids } from "@mediagate/core"
import { FileMediaStore } from "@mediagate/media"
import { S3MediaStore } from "@mediagate/media/s3"
import { MemoryMediaStore } from "@mediagate/store-memory"
import { Effect, Layer } from "effect"
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { mediaStoreContract } from "../packages/media/test/MediaStoreContract.js"
import { checkingS3SkipReason, checkingS3Url, freshCheckingBucket, type TestS3 } from "../packages/media/test/CheckingS3.js"
import { type RunningS3rver, startS3rver } from "../packages/media/test/S3rver.js"
import { streamStoreContract } from "../packages/media/test/StreamStoreContract.js"

const root = mkdtempSync(join(tmpdir(), "mediagate-media-contract-"))
let s3: RunningS3rver | undefined
let checking: TestS3 | undefined
beforeAll(async () => {
  s3 = await startS3rver()
  if (checkingS3Url !== undefined) checking = await freshCheckingBucket("contract")
})
afterAll(async () => {
  await s3?.close()
  await checking?.close()
  rmSync(root, { recursive: true, force: true })
})
let count = 0

const provide = <A, E>(effect: Effect.Effect<A, E, Ids.Ids>) => Effect.provide(effect, Ids.layerTest)

mediaStoreContract("memory", () => (baseUrl) => MemoryMediaStore.layer({ baseUrl }), provide)
mediaStoreContract("file", () => {
  const directory = join(root, `store-${++count}`)
  return (baseUrl) => FileMediaStore.layerWith({ directory, baseUrl })
}, provide)
mediaStoreContract("S3 (s3rver)", () => {
  const prefix = `contract-${++count}/`
  return (baseUrl) =>
    Layer.suspend(() => S3MediaStore.layerWith({ bucket: s3!.bucket, prefix, client: s3!.client, baseUrl }))
}, provide)
mediaStoreContract("S3 (Ceph RGW, which checks signatures)", () => {
  const prefix = `contract-${++count}/`
  return (baseUrl) =>
    Layer.suspend(() => S3MediaStore.layerWith({ bucket: checking!.bucket, prefix, client: checking!.client, baseUrl }))
}, provide, checkingS3SkipReason("media-store-contract"))

/** A folder of its own for one test. */
const folder = (name: string) => {
  const directory = join(root, `${name}-${++count}`)
  mkdirSync(directory)
  return directory
}

/** The S3 store on `server` under a prefix of its own, spooling to a folder of its own; what both hold. */
const s3Uploads = (server: () => TestS3) => () => {
  const prefix = `uploads-${++count}/`
  const spoolDirectory = folder("spool")
  return {
    store: (baseUrl: string) =>
      Layer.suspend(() => S3MediaStore.layerWith({ bucket: server().bucket, prefix, client: server().client, baseUrl, spoolDirectory })),
    leftovers: async () => {
      const client = S3MediaStore.makeClient(server().client)
      try {
        const listed = await client.send(new ListObjectsV2Command({ Bucket: server().bucket, Prefix: prefix }))
        return [...(listed.Contents ?? []).map((object) => object.Key ?? ""), ...readdirSync(spoolDirectory)].sort()
      } finally {
        client.destroy()
      }
    }
  }
}

streamStoreContract("memory", () => ({ store: (baseUrl) => MemoryMediaStore.layer({ baseUrl }), leftovers: async () => [] }), provide)
streamStoreContract("file", () => {
  const directory = folder("file")
  return { store: (baseUrl) => FileMediaStore.layerWith({ directory, baseUrl }), leftovers: async () => readdirSync(directory).sort() }
}, provide)
streamStoreContract("S3 (s3rver)", s3Uploads(() => s3!), provide)
streamStoreContract("S3 (Ceph RGW, which checks signatures)", s3Uploads(() => checking!), provide, checkingS3SkipReason("media-upload-contract"))
