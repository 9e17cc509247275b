// A host embedding mediagate from the installed packages, run with plain node (no
// TypeScript loader): the standard services over the memory backends and the simulator on
// a loopback port; one task submitted over HTTP with a callBackUrl to a receiver in this
// script; exits 0 once the signed callback arrives and verifies. test/pack.test.ts copies
// this file into a scratch project outside the workspace.
import { MediagateHttp } from "@mediagate/http"
import { verifyCallback } from "@mediagate/client"
import { Backends, Deployment } from "@mediagate/server"
import { Either, Redacted } from "effect"
import { createServer } from "node:http"

const apiKey = "mg_pack_key_0123456789"
const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

const fail = (message) => {
  console.error(`embed: ${message}`)
  process.exit(1)
}
setTimeout(() => fail("no callback within 60 s"), 60_000).unref()

const listen = (server) =>
  new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server.address().port)))

// The receiver: the first POST to /hook is the callback.
let received
const callback = new Promise((resolve) => (received = resolve))
const receiver = createServer((request, response) => {
  const chunks = []
  request.on("data", (chunk) => chunks.push(chunk))
  request.on("end", () => {
    response.writeHead(200).end()
    if (request.method === "POST" && request.url === "/hook") received({ headers: request.headers, body: Buffer.concat(chunks).toString("utf8") })
  })
})
const receiverPort = await listen(receiver)

// The host's server; mediagate answers every request under /api/v1/ and /media/.
const server = createServer()
const port = await listen(server)
const backends = Backends.memoryBackends({ publicUrl: `http://127.0.0.1:${port}` }, [
  { id: "acct_pack", name: "pack", apiKey: Redacted.make(apiKey), webhookSecret: Redacted.make(secret), credits: 1_000_000_000 }
])
const api = await MediagateHttp.makeNodeHandler(
  // Loopback callbacks need private addresses allowed (development and tests only).
  Deployment.services({ simulatorProfile: "instant", allowPrivateUrls: true, backends })
)
server.on("request", (request, response) => {
  const path = (request.url ?? "/").split("?")[0]
  if (path.startsWith("/api/v1/") || path.startsWith("/media/")) return api.handler(request, response)
  response.writeHead(404).end()
})

const submitted = await fetch(`http://127.0.0.1:${port}/api/v1/task/submit`, {
  method: "POST",
  headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
  body: JSON.stringify({
    model: "alpha-image-2/text-to-image",
    callBackUrl: `http://127.0.0.1:${receiverPort}/hook`,
    input: { prompt: "a lighthouse at dusk" }
  })
})
const answer = await submitted.json()
if (submitted.status !== 200 || answer.code !== 0) fail(`submit answered ${submitted.status}: ${JSON.stringify(answer)}`)
const taskId = answer.data.taskId
console.log(`submitted ${taskId}`)

const { body, headers } = await callback
const verified = verifyCallback(secret, headers, body)
if (Either.isLeft(verified)) fail(`callback refused: ${verified.left.message}`)
const task = verified.right
if (task.taskId !== taskId) fail(`callback for ${task.taskId}, expected ${taskId}`)
console.log(`callback verified: ${task.taskId} ${task.status}`)

await api.dispose()
server.closeAllConnections()
receiver.closeAllConnections()
await Promise.all([new Promise((resolve) => server.close(resolve)), new Promise((resolve) => receiver.close(resolve))])
process.exit(task.status === "SUCCESS" ? 0 : 1)
