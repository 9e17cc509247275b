/** Bearer-key authentication. */
export * as Auth from "./Auth.js"
/** The admin API's authentication: an admin key passes, a customer key is 403. */
export * as AdminAuthentication from "./AdminAuthentication.js"
/** The envelope on every answer. */
export * as Envelope from "./EnvelopeMiddleware.js"
/** Task endpoint handlers. */
export * as Handlers from "./Handlers.js"
/** The composed HTTP app: serve it, or mount it in a node:http server. */
export * as MediagateHttp from "./MediagateHttp.js"
/** Landing answer and the offline API reference page. */
export * as Docs from "./Docs.js"
/** The playground page at /playground: a form per model, with the estimate, live progress and results. */
export * as Playground from "./Playground.js"
/** The operator's console at /console: a page on the admin API (overview charts, accounts, tasks, providers, audit log). */
export * as Console from "./Console.js"
/** The playground's form functions, as the browser script the page runs. */
export * as PlaygroundForm from "./PlaygroundForm.js"
/** Liveness and readiness (`/healthz`, `/readyz`) and the swappable readiness checks. */
export * as Health from "./Health.js"
/** OpenAPI document and result files. */
export * as Routes from "./Routes.js"
/** The paths the server answers and the methods they take. */
export * as Paths from "./Paths.js"
/** Per-key rate limits: 429 with Retry-After and the IETF RateLimit fields. */
export * as RateLimit from "./RateLimit.js"
/** `GET /metrics` in the Prometheus text format, when enabled. */
export * as Prometheus from "./Prometheus.js"
/** Failed authentications per client address: 429 past the limit, keys known to be good still pass. */
export * as AuthFailures from "./AuthFailures.js"
/** Caps on requests held open (events streams, `?wait=`), per key and in total. */
export * as HeldRequests from "./HeldRequests.js"
/** The depth limit on JSON request bodies. */
export * as JsonDepth from "./JsonDepth.js"
/** Token buckets in bounded memory. */
export * as TokenBuckets from "./TokenBuckets.js"
/** Node's own answers (oversized headers, unparsable requests, unknown methods) in the envelope. */
export * as ClientErrors from "./ClientErrors.js"
/** What a host server needs to hand requests to mediagate: its paths, the Express and Fastify adapters. */
export * as Embedding from "./Embedding.js"
/** The events stream's text: `task` and `progress` events, and the data of each. */
export * as EventStream from "./EventStream.js"
/** How long a client may take to send a request's headers and body. */
export * as RequestTimeouts from "./RequestTimeouts.js"
/** The files endpoints' handlers and the upload rate per account. */
export * as FilesHandlers from "./FilesHandlers.js"
