/**
 * Most models take media URLs over https only (spec: `imageUrls` "https URL"), a rule about
 * the files a provider will fetch from the open network. This deployment's own files (its
 * uploads, its results) are read from its MediaStore, never fetched, and are served over
 * http wherever its public base is http (a development server on loopback). So the model's
 * schema is shown them as https, and the job it makes is given them back as they came: the
 * URL a provider or the simulator is handed is the one the deployment serves.
 */
import { underMediaBase } from "../domain/UrlPolicy.js"

/** Every string in a JSON-like value (arrays, plain objects) passed through `f`; the same value when nothing changed. */
const mapStrings = (value: unknown, f: (text: string) => string): unknown => {
  if (typeof value === "string") return f(value)
  if (Array.isArray(value)) {
    const mapped = value.map((item) => mapStrings(item, f))
    return mapped.some((item, i) => item !== value[i]) ? mapped : value
  }
  if (value !== null && typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) {
    const entries = Object.entries(value).map(([key, item]) => [key, mapStrings(item, f)] as const)
    return entries.some(([key, item]) => item !== (value as Record<string, unknown>)[key]) ? Object.fromEntries(entries) : value
  }
  return value
}

/** The input as the schema sees it, and how to give the job back its own URLs as they came. */
export interface Shown<A> {
  readonly input: A
  /** The job made from `input`, with the https forms of our http URLs back in their own form. */
  readonly restore: <J>(job: J) => J
}

const same: Shown<never>["restore"] = (job) => job

/**
 * `input` with each http URL under `mediaBase` (an http media base) written as https, and its
 * undoing. With an https media base, or none, the input is shown as it is.
 */
export const showAsHttps = <A>(input: A, mediaBase: string | undefined): Shown<A> => {
  if (mediaBase === undefined || !mediaBase.startsWith("http:")) return { input, restore: same }
  const originals = new Map<string, string>()
  const shown = mapStrings(input, (text) => {
    if (!text.startsWith("http:") || underMediaBase(text, mediaBase) === undefined) return text
    const https = `https:${text.slice("http:".length)}`
    originals.set(https, text)
    return https
  }) as A
  if (originals.size === 0) return { input, restore: same }
  return { input: shown, restore: (job) => mapStrings(job, (text) => originals.get(text) ?? text) as typeof job }
}
