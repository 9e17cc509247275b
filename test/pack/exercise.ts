/**
 * What a client of an embedded mediagate does, through a host's server: the host's own
 * route still answers; a 404 names the full path; a submit with a callBackUrl; the events
 * stream to the terminal status; the query; the result file downloaded; the signed callback
 * received and verified. Throws on the first thing that is not as it should be.
 */
import { verifyCallback } from "@mediagate/client"
import { Either } from "effect"
import type { IncomingHttpHeaders } from "node:http"
import { createServer } from "node:http"

const check = (ok: boolean, message: string) => {
  if (!ok) throw new Error(message)
}

/** A loopback receiver whose first POST to /hook is the callback. */
const receiver = async () => {
  let received: (value: { readonly headers: IncomingHttpHeaders; readonly body: string }) => void = () => {}
  const callback = new Promise<{ readonly headers: IncomingHttpHeaders; readonly body: string }>((resolve) => (received = resolve))
  const server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      response.writeHead(200).end()
      if (request.method === "POST" && request.url === "/hook") received({ headers: request.headers, body: Buffer.concat(chunks).toString("utf8") })
    })
  })
  const port = await new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)))
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  return { url: `http://127.0.0.1:${port}/hook`, callback, close }
}

/** The statuses of the `task` events of an events stream, read to its end. */
const eventStatuses = async (response: Response) => {
  check(response.status === 200, `events answered ${response.status}`)
  check(response.headers.get("content-type")?.startsWith("text/event-stream") === true, `events content-type ${response.headers.get("content-type")}`)
  const text = await response.text()
  return text
    .split("\n\n")
    .filter((block) => block.startsWith("event: task\n"))
    .map((block) => (JSON.parse(block.slice(block.indexOf("data: ") + 6)) as { readonly status: string }).status)
}

const withTimeout = <A>(promise: Promise<A>, ms: number, what: string) =>
  Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms).unref())])

/** What the exercise saw, for the log. */
export interface Exercised {
  readonly taskId: string
  readonly events: ReadonlyArray<string>
  readonly file: { readonly contentType: string; readonly bytes: number }
  readonly callback: string
}

/** Runs the client's side against `baseUrl`; `own` is the host's own route and its answer. */
export const exercise = async (
  baseUrl: string,
  options: { readonly apiKey: string; readonly webhookSecret: string; readonly own: { readonly path: string; readonly body: string } }
): Promise<Exercised> => {
  const auth = { authorization: `Bearer ${options.apiKey}` }

  const own = await fetch(`${baseUrl}${options.own.path}`)
  const ownBody = await own.text()
  check(own.status === 200 && ownBody === options.own.body, `the host's own route answered ${own.status} ${ownBody}`)

  const unknown = await fetch(`${baseUrl}/api/v1/nope`, { headers: auth })
  const unknownBody = await unknown.text()
  check(unknown.status === 404 && unknownBody === JSON.stringify({ code: 404, msg: "not found: /api/v1/nope" }), `unknown path: ${unknown.status} ${unknownBody}`)

  const hook = await receiver()
  try {
    const submitted = await fetch(`${baseUrl}/api/v1/task/submit`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ model: "alpha-image-2/text-to-image", callBackUrl: hook.url, input: { prompt: "a lighthouse at dusk" } })
    })
    const answer = (await submitted.json()) as { readonly code: number; readonly data?: { readonly taskId: string } }
    check(submitted.status === 200 && answer.code === 0 && answer.data !== undefined, `submit answered ${submitted.status} ${JSON.stringify(answer)}`)
    const taskId = answer.data!.taskId

    const events = await withTimeout(
      fetch(`${baseUrl}/api/v1/task/${taskId}/events`, { headers: auth }).then(eventStatuses),
      30_000,
      "events stream"
    )
    check(events.at(-1) === "SUCCESS", `events: ${events.join(", ")}`)

    const queried = await fetch(`${baseUrl}/api/v1/task/${taskId}?wait=30`, { headers: auth })
    const task = (await queried.json()) as { readonly data: { readonly status: string; readonly result: { readonly type: string; readonly urls: ReadonlyArray<string> } | null } }
    check(task.data.status === "SUCCESS" && task.data.result !== null, `query: ${JSON.stringify(task)}`)
    const fileUrl = task.data.result!.urls[0]!
    check(fileUrl.startsWith(`${baseUrl}/media/`), `result URL ${fileUrl} is not under ${baseUrl}/media/`)

    const file = await fetch(fileUrl)
    const bytes = new Uint8Array(await file.arrayBuffer())
    const contentType = file.headers.get("content-type") ?? ""
    check(file.status === 200 && contentType === "image/png", `result file answered ${file.status} ${contentType}`)
    check(bytes[0] === 0x89 && bytes[1] === 0x50 && bytes[2] === 0x4e && bytes[3] === 0x47, "the result file is not a PNG")

    const { body, headers } = await withTimeout(hook.callback, 30_000, "callback")
    const verified = verifyCallback(options.webhookSecret, headers as Record<string, string>, body)
    if (Either.isLeft(verified)) throw new Error(`callback refused: ${verified.left.message}`)
    check(verified.right.taskId === taskId && verified.right.status === "SUCCESS", `callback for ${verified.right.taskId} ${verified.right.status}`)

    return { taskId, events, file: { contentType, bytes: bytes.length }, callback: `${verified.right.taskId} ${verified.right.status}` }
  } finally {
    await hook.close()
  }
}
