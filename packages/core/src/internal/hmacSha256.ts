/**
 * HMAC-SHA256 (RFC 2104, FIPS 180-4) in plain TypeScript, synchronous and with no platform
 * API: Standard Webhooks signatures are checked where `verifyCallback` runs (a browser, an
 * edge worker, node), and its answer is synchronous, which Web Crypto's `subtle.sign` is not.
 * Checked against node:crypto in core's tests.
 */

const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
])

const rotr = (x: number, n: number) => (x >>> n) | (x << (32 - n))

/** The SHA-256 digest of the concatenated `parts`. */
const sha256 = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  const length = parts.reduce((sum, part) => sum + part.length, 0)
  // The message, a 0x80 byte, zeros up to 56 mod 64, and the length in bits (big-endian, 64 bits).
  const padded = new Uint8Array(Math.ceil((length + 9) / 64) * 64)
  let offset = 0
  for (const part of parts) {
    padded.set(part, offset)
    offset += part.length
  }
  padded[length] = 0x80
  const bits = padded.length - 8
  const high = Math.floor(length / 0x20000000)
  const low = (length << 3) >>> 0
  padded[bits] = high >>> 24
  padded[bits + 1] = high >>> 16
  padded[bits + 2] = high >>> 8
  padded[bits + 3] = high
  padded[bits + 4] = low >>> 24
  padded[bits + 5] = low >>> 16
  padded[bits + 6] = low >>> 8
  padded[bits + 7] = low

  let h0 = 0x6a09e667, h1 = 0xbb67ae85, h2 = 0x3c6ef372, h3 = 0xa54ff53a
  let h4 = 0x510e527f, h5 = 0x9b05688c, h6 = 0x1f83d9ab, h7 = 0x5be0cd19
  const w = new Int32Array(64)
  for (let block = 0; block < padded.length; block += 64) {
    for (let i = 0, j = block; i < 16; i++, j += 4) {
      w[i] = (padded[j]! << 24) | (padded[j + 1]! << 16) | (padded[j + 2]! << 8) | padded[j + 3]!
    }
    for (let i = 16; i < 64; i++) {
      const w15 = w[i - 15]!
      const w2 = w[i - 2]!
      const s0 = rotr(w15, 7) ^ rotr(w15, 18) ^ (w15 >>> 3)
      const s1 = rotr(w2, 17) ^ rotr(w2, 19) ^ (w2 >>> 10)
      w[i] = (w[i - 16]! + s0 + w[i - 7]! + s1) | 0
    }
    let a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, k = h7
    for (let i = 0; i < 64; i++) {
      const t1 = (k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i]! + w[i]!) | 0
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0
      k = g
      g = f
      f = e
      e = (d + t1) | 0
      d = c
      c = b
      b = a
      a = (t1 + t2) | 0
    }
    h0 = (h0 + a) | 0
    h1 = (h1 + b) | 0
    h2 = (h2 + c) | 0
    h3 = (h3 + d) | 0
    h4 = (h4 + e) | 0
    h5 = (h5 + f) | 0
    h6 = (h6 + g) | 0
    h7 = (h7 + k) | 0
  }
  const digest = new Uint8Array(32)
  ;[h0, h1, h2, h3, h4, h5, h6, h7].forEach((word, i) => {
    digest[i * 4] = word >>> 24
    digest[i * 4 + 1] = word >>> 16
    digest[i * 4 + 2] = word >>> 8
    digest[i * 4 + 3] = word
  })
  return digest
}

/** HMAC-SHA256 of the concatenated `message` parts under `key`. */
export const hmacSha256 = (key: Uint8Array, message: ReadonlyArray<Uint8Array>): Uint8Array => {
  const block = new Uint8Array(64)
  block.set(key.length > 64 ? sha256([key]) : key)
  const inner = block.map((byte) => byte ^ 0x36)
  const outer = block.map((byte) => byte ^ 0x5c)
  return sha256([outer, sha256([inner, ...message])])
}
