/**
 * Which URLs we accept from clients and which addresses we connect to (DESIGN.md section 3):
 * callback addresses and media to fetch must be absolute http(s) URLs on public hosts.
 * `checkUrl` judges the literal URL at submit (no DNS: core does no I/O); `isPublicAddress`
 * judges each resolved address when the outbound client connects.
 *
 * Addresses are parsed by ipaddr.js rather than by hand: every spelling a resolver accepts
 * (127.1, 0x7f000001, 0177.0.0.1, mixed IPv6) must reach the same verdict.
 */
import ipaddr from "ipaddr.js"

type Block = readonly [ipaddr.IPv4 | ipaddr.IPv6, number]

const blocks = (cidrs: ReadonlyArray<string>): ReadonlyArray<Block> => cidrs.map((cidr) => ipaddr.parseCIDR(cidr))

/**
 * Every row of the IANA IPv4 special-purpose registry, whatever its "globally reachable"
 * column (no receiver of ours lives on an anycast protocol service), plus multicast.
 */
const refusedIpv4 = blocks([
  "0.0.0.0/8", // this network
  "10.0.0.0/8", // private use
  "100.64.0.0/10", // shared address space (CGNAT)
  "127.0.0.0/8", // loopback
  "169.254.0.0/16", // link local
  "172.16.0.0/12", // private use
  "192.0.0.0/24", // IETF protocol assignments (covers the /29 and /32 rows inside it)
  "192.0.2.0/24", // documentation
  "192.31.196.0/24", // AS112-v4
  "192.52.193.0/24", // AMT
  "192.88.99.0/24", // deprecated 6to4 relay anycast
  "192.168.0.0/16", // private use
  "192.175.48.0/24", // direct delegation AS112
  "198.18.0.0/15", // benchmarking
  "198.51.100.0/24", // documentation
  "203.0.113.0/24", // documentation
  "224.0.0.0/4", // multicast
  "240.0.0.0/4" // reserved, including limited broadcast 255.255.255.255
])

/** Only global unicast is public; inside it, these rows of the IANA IPv6 special-purpose registry are not. */
const globalUnicast = blocks(["2000::/3"])
const refusedIpv6 = blocks([
  "2001::/23", // IETF protocol assignments: Teredo, benchmarking, ORCHID, anycast services
  "2001:db8::/32", // documentation
  "2620:4f:8000::/48", // direct delegation AS112
  "3fff::/20" // documentation
])

/** Forms that carry an IPv4 address in their last 32 bits; they are only as public as it is. */
const embedsIpv4Last = blocks(["::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96"])
/** 6to4 carries the IPv4 address in bits 16 to 48. */
const sixToFour = blocks(["2002::/16"])

const inAny = (address: ipaddr.IPv4 | ipaddr.IPv6, list: ReadonlyArray<Block>) =>
  list.some((block) => address.kind() === block[0].kind() && address.match(block as [ipaddr.IPv4 | ipaddr.IPv6, number]))

const isPublicIpv4 = (address: ipaddr.IPv4) => !inAny(address, refusedIpv4)

const isPublicIpv6 = (address: ipaddr.IPv6): boolean => {
  // A zone id only makes sense for link-local and similar scoped addresses.
  if (address.zoneId !== undefined) return false
  const parts = address.parts
  if (inAny(address, embedsIpv4Last)) {
    return isPublicIpv4(new ipaddr.IPv4([parts[6]! >> 8, parts[6]! & 255, parts[7]! >> 8, parts[7]! & 255]))
  }
  if (inAny(address, sixToFour)) {
    return isPublicIpv4(new ipaddr.IPv4([parts[1]! >> 8, parts[1]! & 255, parts[2]! >> 8, parts[2]! & 255]))
  }
  // Below 2000::/3: loopback, unspecified, IPv4-compatible (deprecated, never routed), discard,
  // SRv6, ULA, link-local, site-local, multicast, unassigned.
  return inAny(address, globalUnicast) && !inAny(address, refusedIpv6)
}

/** The hostname as WHATWG URL (and so fetch and node:http) reads it, or undefined when it reads none. */
const canonicalHost = (hostname: string): string | undefined => {
  // A bare IPv6 literal needs its brackets to sit in a URL.
  const host = hostname.includes(":") && !hostname.startsWith("[") ? `[${hostname}]` : hostname
  try {
    const url = new URL(`http://${host}/`)
    // A port, user, path, query or fragment hidden in the name means it is no hostname.
    const plain = url.port === "" && url.username === "" && url.pathname === "/" && url.search === "" && url.hash === ""
    return plain ? url.hostname.replace(/\.$/, "") : undefined
  } catch {
    return undefined
  }
}

/**
 * The address a canonical hostname spells, if it is a literal. WHATWG URL has already turned
 * every IPv4 spelling into four decimal parts and every IPv6 one into its shortest form, which
 * spares ipaddr.js's own leniencies (it reads `::8.8.8.8` as IPv4-mapped).
 */
const literal = (host: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined =>
  host.startsWith("[") && host.endsWith("]") && ipaddr.IPv6.isValid(host.slice(1, -1))
    ? ipaddr.IPv6.parse(host.slice(1, -1))
    : ipaddr.IPv4.isValidFourPartDecimal(host)
    ? ipaddr.IPv4.parse(host)
    : undefined

const isPublic = (address: ipaddr.IPv4 | ipaddr.IPv6) =>
  address.kind() === "ipv4" ? isPublicIpv4(address as ipaddr.IPv4) : isPublicIpv6(address as ipaddr.IPv6)

/**
 * True when `address` (one IPv4 or IPv6 address, as a resolver answers it) is a public
 * unicast address; false for every special-purpose block and for anything that is not an
 * address at all.
 */
export const isPublicAddress = (address: string): boolean => {
  // Zone ids (fe80::1%eth0) are not URL material; only scoped, so non-public, addresses carry them.
  if (address.includes("%") || address.startsWith("[")) return false
  const host = canonicalHost(address)
  const parsed = host === undefined ? undefined : literal(host)
  return parsed !== undefined && isPublic(parsed)
}

/**
 * True when a URL hostname names no public host: localhost, or a loopback, private,
 * link-local or otherwise special address literal in any spelling. A name is judged by
 * its addresses at connection time, not here.
 */
export const isNonPublicHostname = (hostname: string): boolean => {
  const host = canonicalHost(hostname)
  if (host === undefined || host === "" || host === "localhost" || host.endsWith(".localhost")) return true
  const parsed = literal(host)
  return parsed !== undefined && !isPublic(parsed)
}

/** The refusal of a non-public host, with the switch that allows it for development. */
export const notPublicMessage =
  "must name a public host (localhost and private addresses are not supported; for local development " +
  "allow them with MEDIAGATE_ALLOW_PRIVATE_URLS=true, or allowPrivateUrls: true in Deployment.services (or Mediagate.layer) when embedding)"

/**
 * Longest URL a client may give (callBackUrl, media URLs), in characters: what browsers and
 * most servers and CDNs take, and a bound on what one task stores and sends back.
 */
export const maxUrlLength = 2048

/**
 * How a URL we take must begin, as a JSON Schema pattern: `http://` or `https://`, in any
 * case. WHATWG URL would also read `https:host` and ` https://host`; they are refused, so
 * that the published pattern says exactly what is accepted.
 */
export const httpUrlPattern = "^[Hh][Tt][Tt][Pp][Ss]?://"

/** The same for https alone. */
export const httpsUrlPattern = "^[Hh][Tt][Tt][Pp][Ss]://"

/** The refusal of a URL over `maxUrlLength`. */
export const tooLongMessage = `must be at most ${maxUrlLength} characters`

/** Why a URL is refused, or undefined when it is acceptable. */
export const checkUrl = (
  value: string,
  options: { readonly protocols: ReadonlyArray<"http:" | "https:">; readonly allowPrivate: boolean }
): string | undefined => {
  if (value.length > maxUrlLength) return tooLongMessage
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return "must be an absolute URL"
  }
  if (!options.protocols.includes(url.protocol as "http:" | "https:")) {
    return `must be an ${options.protocols.map((p) => p.slice(0, -1)).join(" or ")} URL`
  }
  if (!new RegExp(httpUrlPattern).test(value)) return "must be an absolute URL"
  if (url.username !== "" || url.password !== "") return "must not contain credentials"
  if (!options.allowPrivate && isNonPublicHostname(url.hostname)) return notPublicMessage
  return undefined
}

/**
 * The name `url` gives under `mediaBase` (this deployment's `<public base>/media`, where its
 * MediaStore's files are served): the rest of its path after the base, a MediaStore key when
 * it names one of our files; undefined when the URL is not under the base. Scheme, host and
 * port compare as WHATWG URL reads them (case, default ports); a query or fragment is ignored,
 * as the media route ignores it.
 */
export const underMediaBase = (url: string, mediaBase: string): string | undefined => {
  if (!URL.canParse(url) || !URL.canParse(mediaBase)) return undefined
  const given = new URL(url)
  const base = new URL(mediaBase)
  if (given.origin !== base.origin || given.origin === "null") return undefined
  const prefix = `${base.pathname.replace(/\/+$/, "")}/`
  return given.pathname.startsWith(prefix) ? given.pathname.slice(prefix.length) : undefined
}
