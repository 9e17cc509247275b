/**
 * Which URLs we accept from clients: callback addresses and media to fetch must be
 * absolute http(s) URLs on public hosts (DESIGN.md section 3). This module checks the
 * literal URL; resolving names to addresses is the safe fetcher's job.
 */

/** One part of an IPv4 literal: decimal, 0x-prefixed hex or 0-led octal, as WHATWG URL and inet_aton read it. */
const ipv4Part = (part: string): number | undefined =>
  /^0x[0-9a-f]*$/.test(part)
    ? (part.length === 2 ? 0 : parseInt(part.slice(2), 16))
    : /^0[0-7]+$/.test(part)
    ? parseInt(part.slice(1), 8)
    : /^(0|[1-9]\d*)$/.test(part)
    ? Number(part)
    : undefined

/**
 * The four octets of an IPv4 literal in any form a resolver accepts (127.0.0.1, 127.1,
 * 0177.0.0.1, 0x7f000001, 2130706433), or undefined when `host` is not one.
 */
const ipv4 = (host: string): ReadonlyArray<number> | undefined => {
  const parts = host.split(".")
  if (parts.length > 4) return undefined
  const numbers = parts.map(ipv4Part)
  if (numbers.some((n) => n === undefined)) return undefined
  const head = numbers.slice(0, -1) as Array<number>
  const last = numbers[numbers.length - 1]!
  if (head.some((n) => n > 255) || last >= 256 ** (4 - head.length)) return undefined
  const value = head.reduce((sum, n, i) => sum + n * 256 ** (3 - i), last)
  return [Math.floor(value / 2 ** 24) % 256, Math.floor(value / 2 ** 16) % 256, Math.floor(value / 2 ** 8) % 256, value % 256]
}

const isPrivateIpv4 = ([a, b]: ReadonlyArray<number>): boolean =>
  a === 0 || a === 10 || a === 127 ||
  (a === 100 && b! >= 64 && b! <= 127) ||
  (a === 169 && b === 254) ||
  (a === 172 && b! >= 16 && b! <= 31) ||
  (a === 192 && b === 168) ||
  (a === 192 && b === 0) ||
  (a === 198 && (b === 18 || b === 19)) ||
  a! >= 224

const isPrivateIpv6 = (host: string): boolean => {
  const h = host.toLowerCase()
  if (h === "::" || h === "::1") return true
  if (/^f[cd]/.test(h) || /^fe[89ab]/.test(h) || h.startsWith("ff")) return true
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(h)
  if (mapped) {
    const v4 = ipv4(mapped[1]!)
    return v4 === undefined || isPrivateIpv4(v4)
  }
  // WHATWG URL normalises ::ffff:a.b.c.d to hex groups.
  const mappedHex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(h)
  if (mappedHex) {
    const hi = parseInt(mappedHex[1]!, 16)
    const lo = parseInt(mappedHex[2]!, 16)
    return isPrivateIpv4([hi >> 8, hi & 255, lo >> 8, lo & 255])
  }
  return false
}

/** True when a URL hostname names no public host: localhost, or a loopback, private, link-local or reserved address literal. */
export const isNonPublicHostname = (hostname: string): boolean => {
  const host = hostname.replace(/^\[|\]$/g, "").replace(/\.$/, "").toLowerCase()
  if (host === "" || host === "localhost" || host.endsWith(".localhost")) return true
  const v4 = ipv4(host)
  if (v4) return isPrivateIpv4(v4)
  if (host.includes(":")) return isPrivateIpv6(host)
  // Numeric-looking but not a valid address (e.g. out of range): refuse rather than guess.
  return /^(0x[0-9a-f]*|\d+)(\.(0x[0-9a-f]*|\d+))*$/.test(host)
}

/** Why a URL is refused, or undefined when it is acceptable. */
export const checkUrl = (
  value: string,
  options: { readonly protocols: ReadonlyArray<"http:" | "https:">; readonly allowPrivate: boolean }
): string | undefined => {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return "must be an absolute URL"
  }
  if (!options.protocols.includes(url.protocol as "http:" | "https:")) {
    return `must be an ${options.protocols.map((p) => p.slice(0, -1)).join(" or ")} URL`
  }
  if (url.username !== "" || url.password !== "") return "must not contain credentials"
  if (!options.allowPrivate && isNonPublicHostname(url.hostname)) {
    return "must name a public host (localhost and private addresses are not supported)"
  }
  return undefined
}
