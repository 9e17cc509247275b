/**
 * Which URLs a client may hand us (DESIGN.md section 3): callback addresses and media
 * URLs must be absolute http(s) URLs on public hosts, unless private hosts are allowed
 * for development.
 */
import { describe, expect, it } from "@effect/vitest"
import { UrlPolicy } from "../src/index.js"

const web = { protocols: ["http:", "https:"], allowPrivate: false } as const
const dev = { protocols: ["http:", "https:"], allowPrivate: true } as const
const notPublic = "must name a public host (localhost and private addresses are not supported)"

/** URLs whose host is not public; the second column is the hostname WHATWG URL gives. */
const nonPublicUrls: ReadonlyArray<readonly [string, string]> = [
  ["http://localhost/cb", "localhost"],
  ["http://LOCALHOST./cb", "localhost."],
  ["http://localhost:8080/cb", "localhost"],
  ["http://foo.localhost/cb", "foo.localhost"],
  ["http://127.0.0.1/cb", "127.0.0.1"],
  ["http://127.1.2.3/cb", "127.1.2.3"],
  ["http://10.0.0.1/cb", "10.0.0.1"],
  ["http://10.255.255.255/cb", "10.255.255.255"],
  ["http://172.16.0.1/cb", "172.16.0.1"],
  ["http://172.20.10.5/cb", "172.20.10.5"],
  ["http://172.31.255.255/cb", "172.31.255.255"],
  ["http://192.168.0.1/cb", "192.168.0.1"],
  ["http://192.168.255.254/cb", "192.168.255.254"],
  ["http://169.254.169.254/latest/meta-data", "169.254.169.254"],
  ["http://0.0.0.0/cb", "0.0.0.0"],
  ["http://100.64.0.1/cb", "100.64.0.1"],
  ["http://100.127.255.255/cb", "100.127.255.255"],
  ["http://224.0.0.1/cb", "224.0.0.1"],
  ["http://[::1]/cb", "[::1]"],
  ["http://[0:0:0:0:0:0:0:1]/cb", "[::1]"],
  ["http://[::]/cb", "[::]"],
  ["http://[fe80::1]/cb", "[fe80::1]"],
  ["http://[fc00::1]/cb", "[fc00::1]"],
  ["http://[fd12:3456::1]/cb", "[fd12:3456::1]"],
  ["http://[::ffff:127.0.0.1]/cb", "[::ffff:7f00:1]"],
  ["http://[::ffff:10.1.2.3]/cb", "[::ffff:a01:203]"],
  ["http://[::ffff:192.168.1.1]/cb", "[::ffff:c0a8:101]"],
  ["http://2130706433/cb", "127.0.0.1"],
  ["http://0x7f000001/cb", "127.0.0.1"],
  ["http://127.1/cb", "127.0.0.1"],
  ["http://0177.0.0.1/cb", "127.0.0.1"],
  ["http://0/cb", "0.0.0.0"]
]

const publicUrls: ReadonlyArray<readonly [string, string]> = [
  ["https://example.com/cb", "example.com"],
  ["http://8.8.8.8/cb", "8.8.8.8"],
  ["http://172.32.0.1/cb", "172.32.0.1"],
  ["http://172.15.255.255/cb", "172.15.255.255"],
  ["http://100.128.0.1/cb", "100.128.0.1"],
  ["http://192.169.0.1/cb", "192.169.0.1"],
  ["https://[2001:4860::8888]/cb", "[2001:4860::8888]"],
  ["https://[::ffff:8.8.8.8]/cb", "[::ffff:808:808]"],
  ["https://1.1.1.1:8443/x?y=1", "1.1.1.1"],
  ["https://localhost.example.com/cb", "localhost.example.com"],
  ["https://127.0.0.1.nip.io/cb", "127.0.0.1.nip.io"]
]

describe("UrlPolicy.isNonPublicHostname and checkUrl: non-public hosts", () => {
  it.each(nonPublicUrls)("%s", (url, hostname) => {
    expect(new URL(url).hostname).toBe(hostname)
    expect(UrlPolicy.isNonPublicHostname(hostname)).toBe(true)
    expect(UrlPolicy.checkUrl(url, web)).toBe(notPublic)
    expect(UrlPolicy.checkUrl(url, dev)).toBeUndefined()
  })
})

describe("UrlPolicy.isNonPublicHostname and checkUrl: public hosts", () => {
  it.each(publicUrls)("%s", (url, hostname) => {
    expect(new URL(url).hostname).toBe(hostname)
    expect(UrlPolicy.isNonPublicHostname(hostname)).toBe(false)
    expect(UrlPolicy.checkUrl(url, web)).toBeUndefined()
    expect(UrlPolicy.checkUrl(url, dev)).toBeUndefined()
  })
})

describe("UrlPolicy.isNonPublicHostname on hostnames not normalised by WHATWG URL", () => {
  it.each([
    "2130706433", // 127.0.0.1 as one decimal number
    "0x7f000001", // 127.0.0.1 as one hex number
    "0X7F000001",
    "127.1",
    "0177.0.0.1",
    "0x7f.0.0.1",
    "10.1",
    "3232235777", // 192.168.1.1
    "localhost.",
    "[::1]",
    "::1",
    "[::ffff:127.0.0.1]",
    "::ffff:10.0.0.1",
    "",
    "99999999999", // beyond IPv4: no public host
    "0x1.0x2.0x3.0x4.0x5" // numeric but five parts: not an address, refused rather than guessed
  ])("%j is not public", (hostname) => {
    expect(UrlPolicy.isNonPublicHostname(hostname)).toBe(true)
  })

  it.each(["134744072", "8.8.8.8", "0x08080808", "example.com", "123.example.com"])(
    "%j is public",
    (hostname) => {
      expect(UrlPolicy.isNonPublicHostname(hostname)).toBe(false)
    }
  )

  it("a malformed mapped address is refused rather than throwing", () => {
    expect(UrlPolicy.isNonPublicHostname("[::ffff:999.1.1.1]")).toBe(true)
  })
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

  it.each(["/relative/path", "example.com/cb", "", "http://", "https://example.com:99999/"])(
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
