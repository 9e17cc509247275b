/**
 * Where an S3 media store keeps its files and how its client reaches the store, read from
 * `MEDIAGATE_MEDIA_URL`-style URLs and the SDK's standard variables. Apart from
 * `S3MediaStore` so that a host (the standalone server) can check its configuration without
 * loading `@aws-sdk/client-s3`, which only `@mediagate/media/s3` imports.
 */
import { Config, Either, Option } from "effect"

/** Where the files go: a bucket, and a prefix their keys are written under (empty, or ending in `/`). */
export interface Location {
  readonly bucket: string
  readonly prefix: string
}

/** How the client reaches the store. Credentials come from the SDK's usual chain (`AWS_ACCESS_KEY_ID`, profiles, roles) unless given. */
export interface ClientOptions {
  readonly region: string
  /** A non-AWS store's address (MinIO, R2, B2...); addressed path-style (`<endpoint>/<bucket>/<key>`). */
  readonly endpoint?: string
  readonly credentials?: { readonly accessKeyId: string; readonly secretAccessKey: string; readonly sessionToken?: string }
  /** Attempts per request, the first included; the SDK's default (3) when not given. */
  readonly maxAttempts?: number
  /** Milliseconds a connection may take to open (default 10 s) and a socket may stay silent (default 60 s) before the request fails. */
  readonly timeouts?: { readonly connect: number; readonly idle: number }
}

/** S3's rule for a bucket name (3 to 63 lowercase letters, digits, dots and hyphens, a letter or digit at each end). */
const bucketPattern = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/

/**
 * `s3://bucket` or `s3://bucket/some/prefix`: the bucket and the prefix keys go under (with
 * a trailing `/`, or empty). The rule it breaks otherwise.
 */
export const parseMediaUrl = (raw: string): Either.Either<Location, string> => {
  const match = /^s3:\/\/([^/?#]+)(\/[^?#]*)?$/.exec(raw.trim())
  if (match === null) return Either.left("must be s3://bucket or s3://bucket/prefix")
  const bucket = match[1]!
  if (!bucketPattern.test(bucket)) return Either.left(`names a bucket S3 does not allow (${JSON.stringify(bucket)})`)
  const segments = (match[2] ?? "").split("/").filter((segment) => segment.length > 0)
  if (segments.some((segment) => segment === "." || segment === "..")) return Either.left("must not have . or .. in its prefix")
  return Either.right({ bucket, prefix: segments.length === 0 ? "" : `${segments.join("/")}/` })
}

/**
 * The client from the SDK's standard variables: `AWS_REGION` (default us-east-1), and for a
 * store that is not AWS `AWS_ENDPOINT_URL_S3` or else `AWS_ENDPOINT_URL`. Credentials are
 * left to the SDK's chain, which reads `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
 * `AWS_SESSION_TOKEN`, `AWS_PROFILE` and instance roles.
 */
export const clientConfig: Config.Config<ClientOptions> = Config.all({
  region: Config.string("AWS_REGION").pipe(Config.orElse(() => Config.string("AWS_DEFAULT_REGION")), Config.withDefault("us-east-1")),
  endpoint: Config.option(Config.string("AWS_ENDPOINT_URL_S3").pipe(Config.orElse(() => Config.string("AWS_ENDPOINT_URL"))))
}).pipe(Config.map(({ endpoint, region }) => Option.match(endpoint, { onNone: () => ({ region }), onSome: (url) => ({ region, endpoint: url }) })))
