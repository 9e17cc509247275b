/**
 * Which URLs a client may hand us and which addresses we connect to (DESIGN.md section 3):
 * callback addresses and media URLs must be absolute http(s) URLs on public hosts, unless
 * private hosts are allowed for development. The IANA special-purpose registries are the
 * test data, row by row.
 */
import { describe, expect, it } from "@effect/vitest"
import { UrlPolicy } from "../src/index.js"
import { ipv4Registry, ipv6Registry, literalUrls, publicAddresses } from "./AddressCorpus.js"

const web = { protocols: ["http:", "https:"], allowPrivate: false } as const
const dev = { protocols: ["http:", "https:"], allowPrivate: true } as const
const notPublic = UrlPolicy.notPublicMessage

describe("UrlPolicy.isPublicAddress: the IANA IPv4 special-purpose registry, row by row", () => {
  for (const [block, name, addresses] of ipv4Registry) {
    it.each(addresses)(`${block} ${name}: %s is refused`, (address) => {
      expect(UrlPolicy.isPublicAddress(address)).toBe(false)
      // The same address carried in IPv6 is refused too.
      expect(UrlPolicy.isPublicAddress(`::ffff:${address}`)).toBe(false)
      expect(UrlPolicy.isPublicAddress(`64:ff9b::${address}`)).toBe(false)
      const [a, b, c, d] = address.split(".").map((part) => Number(part).toString(16).padStart(2, "0"))
      expect(UrlPolicy.isPublicAddress(`2002:${a}${b}:${c}${d}::1`)).toBe(false)
    })
  }
})

describe("UrlPolicy.isPublicAddress: the IANA IPv6 special-purpose registry, row by row", () => {
  for (const [block, name, addresses] of ipv6Registry) {
    it.each(addresses)(`${block} ${name}: %s is refused`, (address) => {
      expect(UrlPolicy.isPublicAddress(address)).toBe(false)
    })
  }
})

describe("UrlPolicy.isPublicAddress: public addresses", () => {
  it.each(publicAddresses)("%s is public", (address) => {
    expect(UrlPolicy.isPublicAddress(address)).toBe(true)
  })

  it.each(["", "example.com", "1.2.3.4.5", "999.1.1.1", "::ffff:999.1.1.1", "[::1]", "gggg::1"])(
    "%j is not an address, so not a public one",
    (value) => {
      expect(UrlPolicy.isPublicAddress(value)).toBe(false)
    }
  )
})

describe("UrlPolicy.checkUrl: literal URLs at submit", () => {
  it.each(literalUrls)("%s is %s", (url, verdict) => {
    expect(UrlPolicy.checkUrl(url, web)).toBe(verdict === "refused" ? notPublic : undefined)
    expect(UrlPolicy.checkUrl(url, dev)).toBeUndefined()
    expect(UrlPolicy.isNonPublicHostname(new URL(url).hostname)).toBe(verdict === "refused")
  })

  it("the refusal says how to allow private hosts for local development", () => {
    expect(notPublic).toContain("MEDIAGATE_ALLOW_PRIVATE_URLS=true")
    // The option an embedder passes, not the service behind it.
    expect(notPublic).toContain("allowPrivateUrls: true in Deployment.services")
  })

  it("a host name is not resolved at submit: a name of a loopback address passes here and is refused when we connect", () => {
    // 127.0.0.1.nip.io resolves to 127.0.0.1 in public DNS. Submit does no DNS (no I/O in core),
    // so the literal check can only judge the name; the outbound connection resolves it and
    // checks every address (packages/media/test/NodeOutbound.test.ts).
    expect(UrlPolicy.checkUrl("https://127.0.0.1.nip.io/cb", web)).toBeUndefined()
    expect(UrlPolicy.isNonPublicHostname("127.0.0.1.nip.io")).toBe(false)
  })
})

describe("UrlPolicy.isNonPublicHostname on hostnames not normalised by WHATWG URL", () => {
  it.each([
    "2130706433",
    "0x7f000001",
    "0X7F000001",
    "127.1",
    "0177.0.0.1",
    "0x7f.0.0.1",
    "10.1",
    "3232235777",
    "localhost.",
    "[::1]",
    "::1",
    "[::ffff:127.0.0.1]",
    "::ffff:10.0.0.1",
    "::7f00:1",
    "2002:7f00:1::",
    "",
    ".",
    "99999999999", // beyond IPv4: not an address and not a name
    "0x1.0x2.0x3.0x4.0x5",
    "[::ffff:999.1.1.1]",
    "exa mple.com"
  ])("%j is not public", (hostname) => {
    expect(UrlPolicy.isNonPublicHostname(hostname)).toBe(true)
  })

  it.each(["134744072", "8.8.8.8", "0x08080808", "example.com", "123.example.com", "[2606:4700::1111]", "2606:4700::1111"])(
    "%j is public",
    (hostname) => {
      expect(UrlPolicy.isNonPublicHostname(hostname)).toBe(false)
    }
  )
})

describe("UrlPolicy.checkUrl: shape of the URL", () => {
  it("refuses schemes other than the allowed ones, whatever the private switch says", () => {
    for (const options of [web, dev]) {
      expect(UrlPolicy.checkUrl("ftp://example.com/x", options)).toBe("must be an http or https URL")
      expect(UrlPolicy.checkUrl("file:///etc/passwd", options)).toBe("must be an http or https URL")
      expect(UrlPolicy.checkUrl("javascript:alert(1)", options)).toBe("must be an http or https URL")
    }
    const httpsOnly = { protocols: ["https:"], allowPrivate: false } as const
    expect(UrlPolicy.checkUrl("http://example.com/x", httpsOnly)).toBe("must be an https URL")
    expect(UrlPolicy.checkUrl("https://example.com/x", httpsOnly)).toBeUndefined()
  })

  // WHATWG URL reads the last three as https://example.com/; the published pattern (^https?://) does not.
  it.each(["/relative/path", "example.com/cb", "", "http://", "https://example.com:99999/", "https:example.com/cb", " https://example.com/cb", "https:\\\\example.com/cb"])(
    "refuses %j as not an absolute URL",
    (url) => {
      expect(UrlPolicy.checkUrl(url, web)).toBe("must be an absolute URL")
      expect(UrlPolicy.checkUrl(url, dev)).toBe("must be an absolute URL")
    }
  )

  it.each(["https://user:pass@example.com/", "https://user@example.com/", "https://:pass@example.com/"])(
    "refuses credentials in %s",
    (url) => {
      expect(UrlPolicy.checkUrl(url, web)).toBe("must not contain credentials")
      expect(UrlPolicy.checkUrl(url, dev)).toBe("must not contain credentials")
    }
  )

  it("scheme and host are case-insensitive", () => {
    expect(UrlPolicy.checkUrl("HTTPS://EXAMPLE.COM/cb", web)).toBeUndefined()
    expect(UrlPolicy.checkUrl("HTTP://LOCALHOST/cb", web)).toBe(notPublic)
  })
})
