/**
 * Runs each host of hosts.ts and the client's side of exercise.ts against it, one after the
 * other; prints one line per host and exits 0 when all passed. test/pack.test.ts compiles
 * this in a scratch project from the packed tarballs and runs it with plain node.
 */
import { exercise } from "./exercise.js"
import { startExpress, startFastify, startHono } from "./hosts.js"

const apiKey = "mg_pack_key_0123456789"
const webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

setTimeout(() => {
  console.error("hosts: not done within 120 s")
  process.exit(1)
}, 120_000).unref()

for (const start of [startExpress, startFastify, startHono]) {
  const host = await start({ apiKey, webhookSecret })
  try {
    const seen = await exercise(host.url, { apiKey, webhookSecret, own: host.own })
    console.log(`${host.name}: task ${seen.taskId} events ${seen.events.join(",")} file ${seen.file.contentType} ${seen.file.bytes} bytes, callback verified: ${seen.callback}`)
  } finally {
    await host.close()
  }
}
process.exit(0)
