import { describe, expect, it } from "@effect/vitest"
import { UrlPolicy } from "../src/index.js"

const hostOf = (url: string) => new URL(url).hostname

describe("UrlPolicy", () => {
  const nonPublic = [
    "http://localhost/", "http://LOCALHOST./", "http://api.localhost/", "http://127.0.0.1/", "http://127.1.2.3/",
    "http://10.0.0.1/", "http://172.16.0.1/", "http://172.31.255.255/", "http://192.168.1.1/", "http://169.254.169.254/",
    "http://0.0.0.0/", "http://100.64.0.1/", "http://224.0.0.1/", "http://[::1]/", "http://[::]/", "http://[fe80::1]/",
    "http://[fc00::1]/", "http://[fd12:3456::1]/", "http://[::ffff:127.0.0.1]/", "http://[::ffff:10.1.2.3]/",
    "http://2130706433/", "http://0x7f000001/", "http://127.1/"
  ]
  for (const url of nonPublic) {
    it(`${url} names no public host`, () => {
      expect(UrlPolicy.isNonPublicHostname(hostOf(url))).toBe(true)
      expect(UrlPolicy.checkUrl(url, { protocols: ["http:", "https:"], allowPrivate: false })).toBe(
        "must name a public host (localhost and private addresses are not supported)"
      )
      expect(UrlPolicy.checkUrl(url, { protocols: ["http:", "https:"], allowPrivate: true })).toBeUndefined()
    })
  }
  for (const url of ["https://example.com/cb", "http://8.8.8.8/", "http://172.32.0.1/", "https://[2001:4860::8888]/", "https://1.1.1.1:8443/x?y=1"]) {
    it(`${url} is public`, () => {
      expect(UrlPolicy.isNonPublicHostname(hostOf(url))).toBe(false)
      expect(UrlPolicy.checkUrl(url, { protocols: ["http:", "https:"], allowPrivate: false })).toBeUndefined()
    })
  }
  it("refuses other schemes, relative URLs and credentials", () => {
    const http = { protocols: ["http:", "https:"] as const, allowPrivate: false }
    expect(UrlPolicy.checkUrl("ftp://example.com/x", { ...http, protocols: ["http:", "https:"] })).toBe("must be an http or https URL")
    expect(UrlPolicy.checkUrl("http://example.com/x", { protocols: ["https:"], allowPrivate: false })).toBe("must be an https URL")
    expect(UrlPolicy.checkUrl("/relative", { ...http, protocols: ["http:", "https:"] })).toBe("must be an absolute URL")
    expect(UrlPolicy.checkUrl("https://u:p@example.com/", { ...http, protocols: ["http:", "https:"] })).toBe("must not contain credentials")
  })
})
