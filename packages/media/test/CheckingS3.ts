/**
 * An S3 server that checks SigV4 signatures, for the tests that s3rver cannot tell apart
 * (it accepts any secret): the one at MEDIAGATE_TEST_S3_URL, `http://ACCESS_KEY:SECRET@host:port`,
 * which scripts/ceph/start.sh starts (Ceph RGW on loopback) and prints, and .ci/run sets.
 * Each suite gets a bucket of its own, created here and deleted with its objects at the end,
 * so that suites running side by side on the one server see nothing of each other's.
 */
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  ListObjectsV2Command,
  type S3Client
} from "@aws-sdk/client-s3"
import { randomBytes } from "node:crypto"
import { S3MediaStore } from "../src/s3.js"
import { s3SkipMarker } from "./s3SkipMarker.js"

/** A bucket on an S3 server on loopback, with what a client needs to reach it. */
export interface TestS3 {
  readonly endpoint: string
  readonly bucket: string
  readonly client: S3MediaStore.ClientOptions
  readonly close: () => Promise<void>
}

/** The signature-checking server's URL, or undefined (its cases are then skipped). */
export const checkingS3Url: string | undefined = process.env["MEDIAGATE_TEST_S3_URL"] || undefined

/**
 * Why a suite's cases on the signature-checking server are skipped, for their names; empty
 * when they run. When they do not, it says so once in the log (`s3SkipMarker` and the
 * suite's name), which the run's summary (scripts/run-summary/reporter.ts) gathers into one
 * line.
 */
export const checkingS3SkipReason = (suite: string): string => {
  if (checkingS3Url !== undefined) return ""
  console.warn(`${s3SkipMarker}${suite}`)
  return " [skipped: MEDIAGATE_TEST_S3_URL is not set]"
}

/** The endpoint and credentials of MEDIAGATE_TEST_S3_URL. */
export const checkingS3Server = (url = checkingS3Url!) => {
  const parsed = new URL(url)
  return {
    endpoint: parsed.origin,
    accessKeyId: decodeURIComponent(parsed.username),
    secretAccessKey: decodeURIComponent(parsed.password)
  }
}

/** Deletes every object of `bucket` (a page of 1,000 at a time), then the bucket. */
const dropBucket = async (client: S3Client, bucket: string) => {
  for (;;) {
    const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket }))
    const keys = (listed.Contents ?? []).flatMap((object) => object.Key === undefined ? [] : [{ Key: object.Key }])
    if (keys.length === 0) break
    await client.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys, Quiet: true } }))
  }
  await client.send(new DeleteBucketCommand({ Bucket: bucket }))
}

/** A new bucket named after `label` on the signature-checking server; `close` deletes it. */
export const freshCheckingBucket = async (label: string): Promise<TestS3> => {
  const { accessKeyId, endpoint, secretAccessKey } = checkingS3Server()
  const bucket = `mediagate-${label}-${process.pid}-${randomBytes(4).toString("hex")}`
  const client: S3MediaStore.ClientOptions = { region: "us-east-1", endpoint, credentials: { accessKeyId, secretAccessKey }, maxAttempts: 1 }
  const admin = S3MediaStore.makeClient(client)
  await admin.send(new CreateBucketCommand({ Bucket: bucket }))
  return {
    endpoint,
    bucket,
    client,
    close: async () => {
      try {
        await dropBucket(admin, bucket)
      } finally {
        admin.destroy()
      }
    }
  }
}
