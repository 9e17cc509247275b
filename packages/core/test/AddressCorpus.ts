/**
 * The address corpus (DESIGN.md section 3): every address and URL spelling that must be
 * refused, and the public ones next to them that must pass. The IANA special-purpose
 * registries are the test data, row by row. Shared by the policy's own tests, the outbound
 * connections' (a name resolving to each address) and the submit endpoint's.
 */

/**
 * The IANA IPv4 Special-Purpose Address Registry (iana-ipv4-special-registry, as of 2025),
 * plus multicast 224.0.0.0/4 from the address-space registry. Every row is refused, whatever
 * its "globally reachable" column: a webhook receiver or a media host never lives on an
 * anycast protocol service. Columns: block, name, addresses in it (first, inside, last).
 */
export const ipv4Registry: ReadonlyArray<readonly [string, string, ReadonlyArray<string>]> = [
  ["0.0.0.0/8", "This network", ["0.0.0.0", "0.1.2.3", "0.255.255.255"]],
  ["0.0.0.0/32", "This host on this network", ["0.0.0.0"]],
  ["10.0.0.0/8", "Private-Use", ["10.0.0.0", "10.20.30.40", "10.255.255.255"]],
  ["100.64.0.0/10", "Shared Address Space", ["100.64.0.0", "100.100.100.200", "100.127.255.255"]],
  ["127.0.0.0/8", "Loopback", ["127.0.0.0", "127.0.0.1", "127.255.255.255"]],
  ["169.254.0.0/16", "Link Local", ["169.254.0.0", "169.254.169.254", "169.254.255.255"]],
  ["172.16.0.0/12", "Private-Use", ["172.16.0.0", "172.20.10.5", "172.31.255.255"]],
  ["192.0.0.0/24", "IETF Protocol Assignments", ["192.0.0.0", "192.0.0.100", "192.0.0.255"]],
  ["192.0.0.0/29", "IPv4 Service Continuity Prefix", ["192.0.0.0", "192.0.0.7"]],
  ["192.0.0.8/32", "IPv4 dummy address", ["192.0.0.8"]],
  ["192.0.0.9/32", "Port Control Protocol Anycast", ["192.0.0.9"]],
  ["192.0.0.10/32", "Traversal Using Relays around NAT Anycast", ["192.0.0.10"]],
  ["192.0.0.170/32", "NAT64/DNS64 Discovery", ["192.0.0.170"]],
  ["192.0.0.171/32", "NAT64/DNS64 Discovery", ["192.0.0.171"]],
  ["192.0.2.0/24", "Documentation (TEST-NET-1)", ["192.0.2.0", "192.0.2.1", "192.0.2.255"]],
  ["192.31.196.0/24", "AS112-v4", ["192.31.196.0", "192.31.196.255"]],
  ["192.52.193.0/24", "AMT", ["192.52.193.0", "192.52.193.255"]],
  ["192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", ["192.88.99.0", "192.88.99.1", "192.88.99.255"]],
  ["192.88.99.2/32", "6a44-relay anycast address", ["192.88.99.2"]],
  ["192.168.0.0/16", "Private-Use", ["192.168.0.0", "192.168.1.1", "192.168.255.255"]],
  ["192.175.48.0/24", "Direct Delegation AS112 Service", ["192.175.48.0", "192.175.48.255"]],
  ["198.18.0.0/15", "Benchmarking", ["198.18.0.0", "198.19.255.255"]],
  ["198.51.100.0/24", "Documentation (TEST-NET-2)", ["198.51.100.0", "198.51.100.255"]],
  ["203.0.113.0/24", "Documentation (TEST-NET-3)", ["203.0.113.0", "203.0.113.255"]],
  ["240.0.0.0/4", "Reserved", ["240.0.0.0", "250.1.2.3", "255.255.255.254"]],
  ["255.255.255.255/32", "Limited Broadcast", ["255.255.255.255"]],
  ["224.0.0.0/4", "Multicast (address-space registry)", ["224.0.0.0", "224.0.0.1", "239.255.255.255"]]
]

/**
 * The IANA IPv6 Special-Purpose Address Registry (iana-ipv6-special-registry, as of 2025),
 * plus the blocks outside global unicast 2000::/3 that the address-space registry reserves
 * (multicast, deprecated site-local, IPv4-compatible). The rows that carry an IPv4 address
 * (mapped, translated, NAT64, 6to4) are refused when the IPv4 address is, and judged by it
 * otherwise (see the public table below); IPv4-compatible addresses are refused outright.
 */
export const ipv6Registry: ReadonlyArray<readonly [string, string, ReadonlyArray<string>]> = [
  ["::1/128", "Loopback Address", ["::1", "0:0:0:0:0:0:0:1"]],
  ["::/128", "Unspecified Address", ["::", "0:0:0:0:0:0:0:0"]],
  ["::ffff:0:0/96", "IPv4-mapped Address", ["::ffff:127.0.0.1", "::ffff:7f00:1", "::ffff:10.1.2.3", "::ffff:0.0.0.0", "::ffff:255.255.255.255"]],
  ["64:ff9b::/96", "IPv4-IPv6 Translat.", ["64:ff9b::7f00:1", "64:ff9b::10.0.0.1", "64:ff9b::169.254.169.254"]],
  ["64:ff9b:1::/48", "IPv4-IPv6 Translat. (local use)", ["64:ff9b:1::", "64:ff9b:1::808:808", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff"]],
  ["100::/64", "Discard-Only Address Block", ["100::", "100::1", "100::ffff:ffff:ffff:ffff"]],
  ["100:0:0:1::/64", "Dummy IPv6 Prefix", ["100:0:0:1::", "100:0:0:1::1"]],
  ["2001::/23", "IETF Protocol Assignments", ["2001::", "2001:100::1", "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff"]],
  ["2001::/32", "TEREDO", ["2001::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2"]],
  ["2001:1::1/128", "Port Control Protocol Anycast", ["2001:1::1"]],
  ["2001:1::2/128", "Traversal Using Relays around NAT Anycast", ["2001:1::2"]],
  ["2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", ["2001:1::3"]],
  ["2001:2::/48", "Benchmarking", ["2001:2::", "2001:2:0:ffff::1"]],
  ["2001:3::/32", "AMT", ["2001:3::", "2001:3:ffff::1"]],
  ["2001:4:112::/48", "AS112-v6", ["2001:4:112::", "2001:4:112:ffff::1"]],
  ["2001:10::/28", "Deprecated (previously ORCHID)", ["2001:10::", "2001:1f::1"]],
  ["2001:20::/28", "ORCHIDv2", ["2001:20::", "2001:2f::1"]],
  ["2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", ["2001:30::", "2001:3f::1"]],
  ["2001:db8::/32", "Documentation", ["2001:db8::", "2001:db8::1", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"]],
  ["2002::/16", "6to4", ["2002:7f00:1::", "2002:a00:1::", "2002:c0a8:101::1", "2002::"]],
  ["2620:4f:8000::/48", "Direct Delegation AS112 Service", ["2620:4f:8000::", "2620:4f:8000:ffff::1"]],
  ["3fff::/20", "Documentation", ["3fff::", "3fff:fff:ffff::1"]],
  ["5f00::/16", "Segment Routing (SRv6) SIDs", ["5f00::", "5f00:ffff::1"]],
  ["fc00::/7", "Unique-Local", ["fc00::", "fc00::1", "fd12:3456::1", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"]],
  ["fe80::/10", "Link-Local Unicast", ["fe80::", "fe80::1", "fe80::1%eth0", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff"]],
  ["fec0::/10", "Site-local (deprecated, address-space registry)", ["fec0::", "fec0::1", "feff::1"]],
  ["ff00::/8", "Multicast (address-space registry)", ["ff00::", "ff02::1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"]],
  ["::/96", "IPv4-compatible (deprecated, never routed)", ["::7f00:1", "::127.0.0.1", "::a00:1", "::2", "::8.8.8.8"]],
  ["::ffff:0:0:0/96", "IPv4-translated (RFC 6145)", ["::ffff:0:7f00:1", "::ffff:0:a00:1"]],
  ["4000::/2", "outside global unicast 2000::/3 (unassigned)", ["4000::1", "8000::1", "1000::1", "e000::1"]]
]

/** Public addresses, many of them next to a refused block: they must pass. */
export const publicAddresses: ReadonlyArray<string> = [
  "8.8.8.8", "1.1.1.1", "192.0.78.9", "192.0.1.255", "192.0.3.0", "192.0.1.1", "192.88.98.255", "192.88.100.0",
  "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0", "192.167.255.255", "192.169.0.0",
  "198.17.255.255", "198.20.0.0", "198.51.99.255", "203.0.112.255", "203.0.114.0", "223.255.255.255",
  "169.253.255.255", "126.255.255.255", "128.0.0.0", "11.0.0.0", "9.255.255.255", "1.0.0.0",
  "2606:4700::1111", "2001:4860:4860::8888", "2001:200::1", "2a00:1450:4001:80b::200e", "2620:4f:8001::1",
  "3fff:1000::1", "3ffe::1", "2000::1",
  // IPv4 carried in IPv6, judged by the IPv4 address.
  "::ffff:8.8.8.8", "::ffff:808:808", "64:ff9b::808:808", "64:ff9b::1.1.1.1", "2002:808:808::1"
]

/** Literal URLs at submit: the host as written, then the verdict without the development switch. */
export const literalUrls: ReadonlyArray<readonly [string, "refused" | "accepted"]> = [
  // Names that are never public.
  ["http://localhost/cb", "refused"],
  ["http://LOCALHOST./cb", "refused"],
  ["http://localhost:8080/cb", "refused"],
  ["http://foo.localhost/cb", "refused"],
  // IPv4 in every spelling a resolver or WHATWG URL accepts.
  ["http://127.0.0.1/cb", "refused"],
  ["http://127.0.0.1./cb", "refused"],
  ["http://127.1/cb", "refused"],
  ["http://127.0.1/cb", "refused"],
  ["http://2130706433/cb", "refused"],
  ["http://0x7f000001/cb", "refused"],
  ["http://0X7F.0.0.1/cb", "refused"],
  ["http://0177.0.0.1/cb", "refused"],
  ["http://017700000001/cb", "refused"],
  ["http://0/cb", "refused"],
  ["http://0x0/cb", "refused"],
  ["http://10.1/cb", "refused"],
  ["http://3232235777/cb", "refused"], // 192.168.1.1
  ["http://169.254.169.254/latest/meta-data", "refused"],
  ["http://100.64.0.1/cb", "refused"],
  ["http://198.18.0.1/cb", "refused"],
  ["http://192.0.0.1/cb", "refused"],
  ["http://192.0.2.1/cb", "refused"],
  ["http://240.0.0.1/cb", "refused"],
  ["http://255.255.255.255/cb", "refused"],
  // Bracketed IPv6 in every spelling.
  ["http://[::1]/cb", "refused"],
  ["http://[0:0:0:0:0:0:0:1]/cb", "refused"],
  ["http://[::]/cb", "refused"],
  ["http://[::7f00:1]/cb", "refused"],
  ["http://[::127.0.0.1]/cb", "refused"],
  ["http://[::ffff:127.0.0.1]/cb", "refused"],
  ["http://[::FFFF:7F00:1]/cb", "refused"],
  ["http://[64:ff9b::7f00:1]/cb", "refused"],
  ["http://[64:ff9b::127.0.0.1]/cb", "refused"],
  ["http://[2002:7f00:1::]/cb", "refused"],
  ["http://[2001::1]/cb", "refused"],
  ["http://[fec0::1]/cb", "refused"],
  ["http://[fe80::1]/cb", "refused"],
  ["http://[fd00::1]/cb", "refused"],
  ["http://[ff02::1]/cb", "refused"],
  ["http://[2001:db8::1]/cb", "refused"],
  // Public.
  ["https://example.com/cb", "accepted"],
  ["https://example.com./cb", "accepted"],
  ["http://8.8.8.8/cb", "accepted"],
  ["http://134744072/cb", "accepted"], // 8.8.8.8
  ["http://0x08080808/cb", "accepted"],
  ["http://192.0.78.9/cb", "accepted"],
  ["http://172.32.0.1/cb", "accepted"],
  ["http://100.128.0.1/cb", "accepted"],
  ["https://1.1.1.1:8443/x?y=1", "accepted"],
  ["https://[2606:4700::1111]/cb", "accepted"],
  ["https://[2001:4860::8888]/cb", "accepted"],
  ["https://[::ffff:8.8.8.8]/cb", "accepted"],
  ["https://localhost.example.com/cb", "accepted"]
]

/**
 * Every refused address of the registries, once each, with the IPv4 ones also carried in
 * IPv6 (mapped, NAT64, 6to4): what a resolver may answer and a connection must refuse.
 */
export const refusedAddresses: ReadonlyArray<string> = [
  ...new Set([
    ...ipv4Registry.flatMap(([, , addresses]) =>
      addresses.flatMap((address) => {
        const [a, b, c, d] = address.split(".").map((part) => Number(part).toString(16).padStart(2, "0"))
        return [address, `::ffff:${address}`, `64:ff9b::${address}`, `2002:${a}${b}:${c}${d}::1`]
      })
    ),
    ...ipv6Registry.flatMap(([, , addresses]) => addresses)
  ])
]

/** The literal URLs refused without the development switch. */
export const refusedUrls: ReadonlyArray<string> = literalUrls.filter(([, verdict]) => verdict === "refused").map(([url]) => url)
