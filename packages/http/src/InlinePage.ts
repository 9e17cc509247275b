/**
 * A page the library serves as one self-contained HTML document (the playground, the
 * console): its style and script inline, allowed by their hashes in its
 * Content-Security-Policy, which lets it talk to this origin only and load nothing else
 * unless the page names more (`policy`). The document and its answer are made once.
 */
import * as Headers from "@effect/platform/Headers"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"
import type { Layer } from "effect"
import { createHash } from "node:crypto"

const sha256 = (text: string) => `'sha256-${createHash("sha256").update(text, "utf8").digest("base64")}'`

export interface InlinePage {
  /** The HTML document. */
  readonly page: string
  readonly contentSecurityPolicy: string
  /** `GET <path>`: the page, with its policy and `nosniff`. */
  readonly route: Layer.Layer<never>
}

export const make = (options: {
  readonly path: `/${string}`
  readonly title: string
  readonly style: string
  readonly body: string
  readonly script: string
  /** Directives beside the page's own (`img-src ...`), placed before `base-uri`. */
  readonly policy?: ReadonlyArray<string>
}): InlinePage => {
  const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${options.title}</title>
<style>${options.style}</style>
</head>
<body>${options.body}<script>${options.script}</script>
</body>
</html>
`
  const contentSecurityPolicy = [
    "default-src 'none'",
    `script-src ${sha256(options.script)}`,
    `style-src ${sha256(options.style)}`,
    "connect-src 'self'",
    ...(options.policy ?? []),
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'"
  ].join("; ")
  const route = HttpApiBuilder.Router.use((router) =>
    router.get(
      options.path,
      Effect.succeed(
        HttpServerResponse.text(page, {
          contentType: "text/html; charset=utf-8",
          headers: Headers.fromInput({ "content-security-policy": contentSecurityPolicy, "x-content-type-options": "nosniff" })
        })
      )
    )
  )
  return { page, contentSecurityPolicy, route }
}
