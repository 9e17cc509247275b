/**
 * The standalone server with MEDIAGATE_MEDIA_URL, as an operator runs it: a child process
 * whose result files go to a bucket and come back through /media/; a bucket that does not
 * exist, or a wrong secret, stops the start with one line. Twice: on s3rver (started here, on
 * loopback), and on a bucket of the S3 server at MEDIAGATE_TEST_S3_URL (Ceph RGW:
 * scripts/ceph/start.sh; skipped when it is not set), which checks SigV4 signatures as
 * s3rver does not: only there can a wrong secret be told from the right one.
 */
import { ListObjectsV2Command } from "@aws-sdk/client-s3"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { S3MediaStore } from "@mediagate/media/s3"
import { setTimeout as pause } from "node:timers/promises"
import { checkingS3SkipReason, freshCheckingBucket, type TestS3 } from "../packages/media/test/CheckingS3.js"
import { startS3rver } from "../packages/media/test/S3rver.js"
import { killAll, startServer } from "./standalone-process.js"
import { apiKey } from "./support.js"

afterAll(() => killAll())

const env = (s3: TestS3, bucketUrl: string, secret = s3.client.credentials!.secretAccessKey) => ({
  MEDIAGATE_DATABASE_URL: "memory",
  MEDIAGATE_API_KEY: apiKey,
  MEDIAGATE_SIMULATOR_PROFILE: "instant",
  MEDIAGATE_MEDIA_URL: bucketUrl,
  AWS_ENDPOINT_URL_S3: s3.endpoint,
  AWS_ACCESS_KEY_ID: s3.client.credentials!.accessKeyId,
  AWS_SECRET_ACCESS_KEY: secret,
  AWS_REGION: "us-east-1"
})

/** Why the start of a server with `env` failed, or undefined when it started. */
const startFailure = (env: Record<string, string>) =>
  startServer(env).then(
    () => undefined,
    (error: Error) => error.message
  )

const servers = [
  { label: "s3rver", start: startS3rver, skipped: "", checksSignatures: false },
  {
    label: "Ceph RGW, which checks signatures",
    start: () => freshCheckingBucket("standalone"),
    skipped: checkingS3SkipReason("standalone-s3"),
    checksSignatures: true
  }
] as const

for (const { checksSignatures, label, skipped, start } of servers) {
  describe.skipIf(skipped !== "")(`standalone server with MEDIAGATE_MEDIA_URL, on ${label}${skipped}`, () => {
    let s3: TestS3
    beforeAll(async () => {
      s3 = await start()
    })
    afterAll(() => s3?.close())

    it("result files are stored in the bucket under the prefix and served through /media/", { timeout: 90_000 }, async () => {
      const server = await startServer(env(s3, `s3://${s3.bucket}/standalone/`))
      expect(server.output()).toContain(`media: s3://${s3.bucket}/standalone/`)
      const base = server.url
      const headers = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" }
      const submitted = await fetch(`${base}/api/v1/task/submit`, {
        method: "POST",
        headers,
        body: JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: "a lighthouse at dawn", n: 1 } })
      }).then((response) => response.json() as Promise<{ data: { taskId: string } }>)
      let task: { status: string; result: { urls: Array<string> } | null } | undefined
      for (let poll = 0; poll < 200 && task?.status !== "SUCCESS"; poll++) {
        // Polls a process on loopback: real time, as an operator's client would.
        if (poll > 0) await pause(50)
        task = (await fetch(`${base}/api/v1/task/${submitted.data.taskId}`, { headers }).then((response) => response.json()) as { data: typeof task }).data
      }
      expect(task?.status).toBe("SUCCESS")
      const url = task!.result!.urls[0]!
      expect(url).toMatch(new RegExp(`^${base}/media/[0-9a-f]{32}\\.png$`))
      const file = await fetch(url)
      expect([file.status, file.headers.get("content-type")]).toEqual([200, "image/png"])
      expect(Buffer.from(await file.arrayBuffer()).subarray(1, 4).toString("latin1")).toBe("PNG")

      const client = S3MediaStore.makeClient(s3.client)
      const listed = await client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: "standalone/" }))
      client.destroy()
      expect(listed.Contents?.map((object) => object.Key)).toEqual([`standalone/${url.split("/").pop()}`])
    })

    it("a bucket that does not exist: one line naming it and the endpoint, exit 1", { timeout: 60_000 }, async () => {
      expect(await startFailure(env(s3, "s3://no-such-bucket"))).toContain(
        `mediagate: cannot start: cannot use bucket no-such-bucket at ${s3.endpoint}: no such bucket\n`
      )
    })

    // Not on s3rver: it takes any secret, so a node with a wrong one starts there and stores results.
    if (checksSignatures) {
      it("a wrong secret: one line, access denied, exit 1", { timeout: 60_000 }, async () => {
        expect(await startFailure(env(s3, `s3://${s3.bucket}/standalone/`, "not-the-secret"))).toContain(
          `mediagate: cannot start: cannot use bucket ${s3.bucket} at ${s3.endpoint}: access denied (check the credentials)\n`
        )
      })
    }
  })
}
