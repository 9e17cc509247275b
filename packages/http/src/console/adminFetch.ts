/**
 * The console's requests: to this origin only, with the admin key in the Authorization
 * header. The key lives in this module's memory and nowhere else (no cookie, no storage):
 * closing or reloading the tab signs out, and no other page or request carries it.
 */

let adminKey = ""

/** Keeps the key for this page's life; "" forgets it. */
export function setKey(key: string): void {
  adminKey = key
}

/** Whether a key is kept. */
export function signedIn(): boolean {
  return adminKey !== ""
}

/** An answer's envelope: the success schema's data, or an error's code and message. */
export type Envelope<A> =
  | { readonly code: 0; readonly msg: string; readonly data: A }
  | { readonly code: number; readonly msg: string; readonly data?: unknown }

/** An answer: its HTTP status and envelope. */
export interface Answer<A> {
  readonly status: number
  readonly envelope: Envelope<A>
}

/** Whether an answer succeeded, narrowing it to its data. */
export function ok<A>(answer: Answer<A>): answer is { readonly status: number; readonly envelope: { readonly code: 0; readonly msg: string; readonly data: A } } {
  return answer.envelope.code === 0 && answer.status < 300
}

/**
 * A request with the key; an answer that is not JSON (a proxy's error page) becomes an error
 * envelope with the start of its text, and a network failure one with the browser's message.
 */
export function api<A>(method: string, path: string, body?: unknown): Promise<Answer<A>> {
  const headers: Record<string, string> = { "Authorization": "Bearer " + adminKey, "Accept": "application/json" }
  if (body !== undefined) headers["Content-Type"] = "application/json"
  return fetch(path, { method: method, headers: headers, body: body === undefined ? null : JSON.stringify(body), credentials: "omit" })
    .then(function(response) {
      return response.text().then(function(text) {
        let envelope: Envelope<A>
        try {
          envelope = JSON.parse(text)
        } catch (e) {
          envelope = { code: response.status, msg: text.slice(0, 200) || "HTTP " + response.status }
        }
        return { status: response.status, envelope: envelope }
      })
    }, function(error: Error) {
      return { status: 0, envelope: { code: -1, msg: "the request did not reach the server: " + error.message } }
    })
}

/** A query string from the given values, leaving out the empty ones. */
export function query(values: Record<string, string | number | null | undefined>): string {
  const parts = Object.keys(values).filter(function(name) {
    const value = values[name]
    return value !== null && value !== undefined && value !== ""
  }).map(function(name) {
    return encodeURIComponent(name) + "=" + encodeURIComponent(String(values[name]))
  })
  return parts.length === 0 ? "" : "?" + parts.join("&")
}
