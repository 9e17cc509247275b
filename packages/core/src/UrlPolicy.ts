/**
 * Which URLs we accept from clients: callback addresses and media to fetch must be
 * absolute http(s) URLs on public hosts (DESIGN.md section 3). This module checks the
 * literal URL; resolving names to addresses is the safe fetcher's job.
 */

const ipv4 = (host: string): ReadonlyArray<number> | undefined => {
  const parts = host.split(".")
  if (parts.length !== 4) return undefined
  const octets = parts.map((part) => (/^\d{1,3}$/.test(part) ? Number(part) : NaN))
  return octets.every((octet) => octet >= 0 && octet <= 255) ? octets : undefined
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
  if (mapped) return isPrivateIpv4(ipv4(mapped[1]!)!)
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
  // A bare number is an IPv4 address to many resolvers (http://2130706433 is 127.0.0.1).
  return /^(0x[0-9a-f]+|\d+)$/.test(host)
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
