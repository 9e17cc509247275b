/**
 * The result files the protocol fakes serve: real, decodable files by extension, so a client
 * that downloads a result gets what the provider's CDN would send. PNGs and MP4s come from
 * the simulator's own encoders; WebP is the 1x1 lossless image browsers use to detect WebP
 * support (no WebP encoder here).
 */
import { Mp4, Png } from "@mediagate/upstream"

const webp = Buffer.from("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==", "base64")

const cache = new Map<string, { readonly bytes: Uint8Array; readonly contentType: string }>()

/** The file named `name` (`req-1-0.png`, `clip.mp4`, `out-0.webp`), or none for an extension the fakes do not make. */
export const file = (name: string): { readonly bytes: Uint8Array; readonly contentType: string } | undefined => {
  const extension = name.split(".").at(-1)
  const known = cache.get(name)
  if (known !== undefined) return known
  // A stable colour per name, so two files of one job differ.
  const seed = [...name].reduce((hash, char) => (hash * 31 + char.charCodeAt(0)) >>> 0, 7)
  const made = extension === "png"
    ? { bytes: Png.encodePng({ width: 64, height: 64, seed }), contentType: "image/png" }
    : extension === "mp4"
    ? { bytes: Mp4.encodeMp4({ width: 64, height: 64, seconds: 1, seed }), contentType: "video/mp4" }
    : extension === "webp"
    ? { bytes: new Uint8Array(webp), contentType: "image/webp" }
    : undefined
  if (made !== undefined) cache.set(name, made)
  return made
}

/** A `data:` URI of the file `name`, as Replicate answers an output under `Prefer: wait`. */
export const dataUri = (name: string): string => {
  const found = file(name)!
  return `data:${found.contentType};base64,${Buffer.from(found.bytes).toString("base64")}`
}

/**
 * A `fetch` that sends requests for the provider CDN's `host` (`https://fal.media`) to the
 * fake at `base` (loopback) and everything else nowhere: no test reaches the internet.
 */
export const cdnFetch = (hosts: Readonly<Record<string, string>>): typeof fetch => (input, init) => {
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url
  if (url.startsWith("data:")) return fetch(url, init)
  for (const [host, base] of Object.entries(hosts)) {
    if (url.startsWith(`${host}/`)) return fetch(`${base}${url.slice(host.length)}`, init)
  }
  if (url.startsWith("http://127.0.0.1:")) return fetch(input, init)
  return Promise.reject(new Error(`the conformance suite does not reach ${url}`))
}
