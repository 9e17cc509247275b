/**
 * An S3-speaking server on loopback for the tests: s3rver, on a free port, its objects in a
 * temporary folder, with one bucket. It does not check SigV4 signatures (CheckingS3.ts gives
 * a server that does); s3rver's gaps (bytes=0-0 answered whole, CopyObject onto itself
 * keeping LastModified, a listing longer than one page failing without node's
 * --openssl-legacy-provider) are in docs/decisions.md.
 */
import S3rver from "s3rver"
import { mkdtempSync, rmSync, utimesSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { TestS3 } from "./CheckingS3.js"

/** A running s3rver. */
export interface RunningS3rver extends TestS3 {
  /** Sets an object's LastModified (s3rver takes it from its file's time): ages a file without waiting. */
  readonly setLastModified: (key: string, at: Date) => void
}

/** Starts s3rver with the bucket `media`. */
export const startS3rver = async (): Promise<RunningS3rver> => {
  const directory = mkdtempSync(join(tmpdir(), "mediagate-s3rver-"))
  const bucket = "media"
  const server = new S3rver({
    address: "127.0.0.1",
    port: 0,
    silent: true,
    directory,
    resetOnClose: true,
    configureBuckets: [{ name: bucket, configs: [] }]
  })
  const { port } = await server.run()
  const endpoint = `http://127.0.0.1:${port}`
  return {
    endpoint,
    bucket,
    client: { region: "us-east-1", endpoint, credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" }, maxAttempts: 1 },
    setLastModified: (key, at) => utimesSync(join(directory, bucket, `${key}._S3rver_object`), at, at),
    close: async () => {
      await server.close()
      rmSync(directory, { recursive: true, force: true })
    }
  }
}
