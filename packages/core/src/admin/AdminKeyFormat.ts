/**
 * The format of admin keys, apart from the accounts' keys so that nobody takes one for the
 * other: `mga_`, 32 random base62 characters and the same CRC-32 checksum as `ApiKeys`
 * (`mga_[0-9A-Za-z]{38}`, 42 characters). A customer key's shape (`mg_...`) never matches
 * it, nor it a customer key's. Keys are stored as their SHA-256 (hex), as customer keys are.
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js"
import { Effect, Redacted } from "effect"
import * as ApiKeys from "../domain/ApiKeys.js"
import { Ids } from "../domain/Ids.js"

export const prefix = "mga_"

/** The shape of an admin key: what a secret scanner looks for. */
export const pattern = /^mga_[0-9A-Za-z]{38}$/

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
const bodyLength = 32

/** Whether `key` is an admin key with a right checksum. */
export const isAdminKey = (key: string): boolean =>
  pattern.test(key) && key.slice(prefix.length + bodyLength) === ApiKeys.checksum(key.slice(0, prefix.length + bodyLength))

/** A new admin key from the Ids service's randomness (190 bits), with its checksum. */
export const generate: Effect.Effect<Redacted.Redacted<string>, never, Ids> = Effect.gen(function*() {
  let n = BigInt(`0x${yield* (yield* Ids).token(24)}`)
  let body = ""
  for (let i = 0; i < bodyLength; i++) {
    body = alphabet[Number(n % 62n)]! + body
    n /= 62n
  }
  const head = `${prefix}${body}`
  return Redacted.make(`${head}${ApiKeys.checksum(head)}`)
})

/** SHA-256 of a key (admin or customer), hex: what the backends store and look up. */
export const hashKey = (key: string): string => bytesToHex(sha256(utf8ToBytes(key)))

/** What people see of an admin key: `mga_` and 4 more characters. */
export const hint = (key: string): string => `${key.slice(0, isAdminKey(key) ? prefix.length + 4 : Math.min(4, Math.floor(key.length / 4)))}...`
