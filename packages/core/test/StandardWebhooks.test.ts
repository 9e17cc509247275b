/**
 * StandardWebhooks, the one implementation of the scheme, has no platform API: its HMAC
 * (@noble/hashes) and its base64 reading are checked here against node's (node:crypto,
 * Buffer), which signed and verified before, so signatures and secrets read exactly as they
 * always did.
 */
import { describe, expect, it } from "@effect/vitest"
import { StandardWebhooks } from "@mediagate/core"
import { createHmac, randomBytes } from "node:crypto"

const nodeSign = (secret: string, id: string, seconds: number, body: string) => {
  const key = Buffer.from(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret, "base64")
  return `v1,${createHmac("sha256", key).update(`${id}.${seconds}.`).update(body).digest("base64")}`
}

/** A small deterministic generator, so a failure repeats. */
const random = (seed: number) => () => {
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed / 2147483648
}

describe("StandardWebhooks", () => {
  it("signs as node:crypto's HMAC-SHA256 does, for bodies and keys of every length around the block sizes", () => {
    const next = random(7)
    const text = (length: number) => Array.from({ length }, () => String.fromCharCode(32 + Math.floor(next() * 95))).join("")
    for (const keyLength of [0, 1, 24, 32, 55, 56, 63, 64, 65, 100, 200]) {
      const secret = `whsec_${randomBytes(keyLength).toString("base64")}`
      for (const bodyLength of [0, 1, 30, 40, 41, 42, 55, 56, 63, 64, 65, 119, 120, 128, 1000, 100_000]) {
        const body = text(bodyLength)
        expect(StandardWebhooks.sign(secret, "msg_1", 1_800_000_000, body)).toBe(nodeSign(secret, "msg_1", 1_800_000_000, body))
      }
    }
    // UTF-8 bodies, lone surrogates included, encode as node encodes them.
    for (const body of ["héllo wörld ✓ 🎉", "\ud800 alone", "\u0000\u0001"]) {
      expect(StandardWebhooks.sign("whsec_c2VjcmV0", "msg_é", 1, body)).toBe(nodeSign("whsec_c2VjcmV0", "msg_é", 1, body))
    }
  })

  it("reads a secret leniently, as Buffer.from(text, 'base64') did: no padding, base64url, stray characters", () => {
    const next = random(11)
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_= $\n."
    for (let i = 0; i < 2000; i++) {
      const secret = Array.from({ length: Math.floor(next() * 40) }, () => alphabet[Math.floor(next() * alphabet.length)]).join("")
      expect(StandardWebhooks.sign(secret, "m", 2, "b"), JSON.stringify(secret)).toBe(nodeSign(secret, "m", 2, "b"))
    }
  })

  it("makes a secret from hex as Buffer did", () => {
    expect(StandardWebhooks.secretFromHex("00112233445566778899aabbccddeeff0011223344556677")).toBe(
      `whsec_${Buffer.from("00112233445566778899aabbccddeeff0011223344556677", "hex").toString("base64")}`
    )
    for (const hex of ["", "0", "abc", "ABCDEF", "12zz34", "1234g"]) {
      expect(StandardWebhooks.secretFromHex(hex), hex).toBe(`whsec_${Buffer.from(hex, "hex").toString("base64")}`)
    }
  })

  it("verify accepts a signature read leniently (no padding) and refuses a truncated one", () => {
    const now = 1_800_000_000_000
    const signature = StandardWebhooks.sign("whsec_c2VjcmV0", "msg_1", now / 1000, "{}")
    const headers = (value: string) => ({ "webhook-id": "msg_1", "webhook-timestamp": String(now / 1000), "webhook-signature": value })
    expect(StandardWebhooks.verify("whsec_c2VjcmV0", headers(signature), "{}", now)).toBe(true)
    expect(StandardWebhooks.verify("whsec_c2VjcmV0", headers(signature.replace(/=+$/, "")), "{}", now)).toBe(true)
    expect(StandardWebhooks.verify("whsec_c2VjcmV0", headers(signature.slice(0, -4)), "{}", now)).toBe(false)
    expect(StandardWebhooks.verify("whsec_c2VjcmV0", headers(signature), new TextEncoder().encode("{}"), now)).toBe(true)
  })
})
