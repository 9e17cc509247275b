/**
 * The memory bound of uploads over HTTP (issue 36: "memory stays flat when 20 clients upload
 * at once"): the standalone server, a child process, takes 20 uploads of 20 MiB at once on
 * POST /api/v1/files (400 MiB in all, half raw, half multipart/form-data), on the file store
 * and on the S3 store (s3rver, in this process, so its memory is not counted), and its peak
 * resident memory (the kernel's VmHWM, reset once the server is warm) grows by less than
 * `allowedGrowth`. Every upload is accepted (a real MP4 followed by a `free` box of padding,
 * each client's of its own byte) and comes back byte for byte from its URL (size and SHA-256).
 * The clients write their bodies from 64 KiB pieces as the socket drains, never a whole body.
 * The file store needs a SQL store beside it: with MEDIAGATE_DATABASE_URL=memory the server
 * keeps its files in memory, and this test then fails with about 570 MiB of growth.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createHash } from "node:crypto"
import { ListObjectsV2Command } from "@aws-sdk/client-s3"
import { S3MediaStore } from "@mediagate/media/s3"
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { get, request } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import { type RunningS3rver, startS3rver } from "../packages/media/test/S3rver.js"
import { killAll, type Server, startServer } from "./standalone-process.js"
import { apiKey } from "./support.js"

const mib = 1024 * 1024
const clients = 20
const size = 20 * mib
/**
 * 150 MiB: far below the 400 MiB that a server holding the bodies would need, and below the
 * 160 MiB of holding even 8 of them; above what 20 streams really take (about 30-60 MiB here:
 * sockets, 64 KiB pieces in flight, and garbage that V8 collects in its own time).
 */
const allowedGrowth = 150 * mib

const root = mkdtempSync(join(tmpdir(), "mediagate-upload-memory-http-"))
let s3: RunningS3rver | undefined
beforeAll(async () => {
  s3 = await startS3rver()
})
afterAll(async () => {
  killAll()
  await s3?.close()
  rmSync(root, { recursive: true, force: true })
})

const video = readFileSync(join(import.meta.dirname, "../packages/media/test/fixtures/video-3s.mp4"))
const piece = 64 * 1024

/** Client `n`'s file, piece by piece: the MP4, then one `free` box of byte `n` to `size` bytes. */
async function* mp4Of(n: number): AsyncGenerator<Buffer> {
  yield video
  const header = Buffer.alloc(8)
  header.writeUInt32BE(size - video.length, 0)
  header.write("free", 4, "latin1")
  yield header
  const filler = Buffer.alloc(piece, n)
  for (let left = size - video.length - header.length; left > 0; left -= piece) yield left >= piece ? filler : filler.subarray(0, left)
}

/** The SHA-256 of client `n`'s file. */
const expectedHash = async (n: number) => {
  const hash = createHash("sha256")
  for await (const bytes of mp4Of(n)) hash.update(bytes)
  return hash.digest("hex")
}

const boundary = "mediagate-memory-boundary"

/** Client `n`'s body and its headers: the file itself, or the file as the field `file` of multipart/form-data. */
const bodyOf = (n: number, multipart: boolean) => {
  if (!multipart) return { headers: { "content-type": "application/octet-stream", "content-length": String(size) }, pieces: mp4Of(n) }
  const head = Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="big.mp4"\r\ncontent-type: video/mp4\r\n\r\n`)
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`)
  async function* pieces() {
    yield head
    yield* mp4Of(n)
    yield tail
  }
  return {
    headers: { "content-type": `multipart/form-data; boundary=${boundary}`, "content-length": String(head.length + size + tail.length) },
    pieces: pieces()
  }
}

/** POSTs client `n`'s body to the server's files endpoint, streamed with backpressure; the status and the envelope. */
const upload = (server: Server, n: number, multipart: boolean) =>
  new Promise<{ status: number; body: { data?: { url: string; bytes: number } } }>((resolve, reject) => {
    const { headers, pieces } = bodyOf(n, multipart)
    const sent = request(`${server.url}/api/v1/files`, { method: "POST", headers: { ...headers, authorization: `Bearer ${apiKey}` } }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        try {
          resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) })
        } catch {
          reject(new Error(`HTTP ${response.statusCode}, not JSON: ${text.slice(0, 200)}`))
        }
      })
      response.on("error", reject)
    })
    sent.on("error", reject)
    pipeline(Readable.from(pieces), sent).catch(reject)
  })

/** The size and SHA-256 of what `url` serves, hashed as it streams. */
const served = (url: string) =>
  new Promise<{ status: number; bytes: number; sha256: string }>((resolve, reject) => {
    get(url, (response) => {
      const hash = createHash("sha256")
      let bytes = 0
      response.on("data", (chunk: Buffer) => {
        bytes += chunk.length
        hash.update(chunk)
      })
      response.on("end", () => resolve({ status: response.statusCode ?? 0, bytes, sha256: hash.digest("hex") }))
      response.on("error", reject)
    }).on("error", reject)
  })

/** A field of the process's /proc status (VmRSS, VmHWM), in bytes. */
const memoryOf = (pid: number, field: "VmRSS" | "VmHWM") => {
  const found = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  if (found === null) throw new Error(`no ${field} in /proc/${pid}/status`)
  return Number(found[1]) * 1024
}

/** Each store: the server's variables for it, and how many files of `size` bytes it holds after the uploads. */
const stores = [
  {
    label: "file",
    // A SQL store: with MEDIAGATE_DATABASE_URL=memory the server keeps its files in memory too.
    env: () => ({ MEDIAGATE_DATABASE_URL: `sqlite:${join(root, "file.db")}`, MEDIAGATE_MEDIA_DIR: join(root, "media") }),
    stored: async () => readdirSync(join(root, "media")).filter((name) => statSync(join(root, "media", name)).size === size).length
  },
  {
    label: "S3 (s3rver)",
    env: () => ({
      MEDIAGATE_DATABASE_URL: `sqlite:${join(root, "s3.db")}`,
      MEDIAGATE_MEDIA_URL: `s3://${s3!.bucket}/upload-memory/`,
      AWS_ENDPOINT_URL_S3: s3!.endpoint,
      AWS_ACCESS_KEY_ID: s3!.client.credentials!.accessKeyId,
      AWS_SECRET_ACCESS_KEY: s3!.client.credentials!.secretAccessKey,
      AWS_REGION: "us-east-1"
    }),
    stored: async () => {
      const client = S3MediaStore.makeClient(s3!.client)
      try {
        const listed = await client.send(new ListObjectsV2Command({ Bucket: s3!.bucket, Prefix: "upload-memory/" }))
        return (listed.Contents ?? []).filter((object) => object.Size === size).length
      } finally {
        client.destroy()
      }
    }
  }
] as const

describe.skipIf(process.platform !== "linux")(`20 clients upload 20 MiB each at once: the server's memory stays flat${process.platform === "linux" ? "" : " [skipped: reads /proc, Linux only]"}`, () => {
  for (const { env, label, stored } of stores) {
    it(`on the ${label} store`, { timeout: 60_000 }, async () => {
      const server = await startServer({
        MEDIAGATE_API_KEY: apiKey,
        MEDIAGATE_UPLOAD_RATE_LIMIT: "off",
        MEDIAGATE_LOG_LEVEL: "warning",
        ...env()
      })
      const pid = server.child.pid!
      // Warm: the upload path's code loaded and run once each way, before the baseline.
      for (const multipart of [false, true]) expect((await upload(server, 255, multipart)).status).toBe(200)
      const baseline = memoryOf(pid, "VmRSS")
      // "5" resets the peak (VmHWM) to the current resident size (Linux 4.0 and later).
      writeFileSync(`/proc/${pid}/clear_refs`, "5")
      const answers = await Promise.all(Array.from({ length: clients }, (_, n) => upload(server, n, n % 2 === 1)))
      const growth = memoryOf(pid, "VmHWM") - baseline
      console.info(`upload-memory-http (${label}): peak resident growth ${(growth / mib).toFixed(1)} MiB for ${clients} x ${size / mib} MiB`)
      expect(answers.map((answer) => [answer.status, answer.body.data?.bytes])).toEqual(answers.map(() => [200, size]))
      for (const [n, answer] of answers.entries()) {
        expect(await served(answer.body.data!.url)).toEqual({ status: 200, bytes: size, sha256: await expectedHash(n) })
      }
      expect(await stored()).toBe(clients + 2) // and the warm-up's two
      expect(growth, `peak resident growth ${(growth / mib).toFixed(1)} MiB`).toBeLessThan(allowedGrowth)
      server.child.kill("SIGKILL")
      await server.exited
    })
  }
})
