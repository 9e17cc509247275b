/**
 * `UrlPolicy.underMediaBase`: which URLs name this deployment's own media (issue 36), compared
 * as WHATWG URL reads them, never by their text alone.
 */
import { describe, expect, it } from "@effect/vitest"
import { UrlPolicy } from "../src/index.js"

const base = "http://127.0.0.1:8080/media"
const key = `${"0f".repeat(16)}.png`

describe("UrlPolicy.underMediaBase", () => {
  it("answers the name under the base, whatever the spelling of scheme, host and default port", () => {
    expect(UrlPolicy.underMediaBase(`${base}/${key}`, base)).toBe(key)
    expect(UrlPolicy.underMediaBase(`HTTP://127.0.0.1:8080/media/${key}`, base)).toBe(key)
    expect(UrlPolicy.underMediaBase(`${base}/${key}?download=1#x`, base)).toBe(key)
    expect(UrlPolicy.underMediaBase(`${base}/${key}`, `${base}/`)).toBe(key)
    expect(UrlPolicy.underMediaBase(`https://Media.Example.COM:443/media/${key}`, "https://media.example.com/media")).toBe(key)
    // A path that is no key is still under the base: the caller refuses it as no file of ours.
    expect(UrlPolicy.underMediaBase(`${base}/sub/${key}`, base)).toBe(`sub/${key}`)
    expect(UrlPolicy.underMediaBase("https://cdn.example.com/m/a.png", "https://cdn.example.com/m")).toBe("a.png")
  })

  it("answers undefined for another origin, another path, or no URL", () => {
    for (
      const url of [
        `http://127.0.0.1:8081/media/${key}`, // another deployment on the same host
        `https://127.0.0.1:8080/media/${key}`, // another scheme
        `http://localhost:8080/media/${key}`, // another name for the host is another origin
        `http://127.0.0.1:8080/mediax/${key}`,
        `http://127.0.0.1:8080/${key}`,
        `http://127.0.0.1:8080/media`,
        `http://127.0.0.1:8080/media/../etc/${key}`, // read as /etc/<key>
        "not a url",
        `data:image/png;base64,AAAA`
      ]
    ) {
      expect(UrlPolicy.underMediaBase(url, base), url).toBeUndefined()
    }
    expect(UrlPolicy.underMediaBase(`${base}/${key}`, "not a base")).toBeUndefined()
  })
})
