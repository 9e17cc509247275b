/**
 * `Retry-After` (RFC 9110, 10.2.3), read one way wherever an answer carries it: a callback
 * receiver's 429 or 503 (the deliverer) and a provider's (the upstream adapters).
 */

/**
 * A `Retry-After` value, delay-seconds or an HTTP date, as milliseconds after `now` (epoch
 * milliseconds; a date already past is 0); undefined when it is absent or neither.
 */
export const millis = (value: string | undefined, now: number): number | undefined => {
  if (value === undefined) return undefined
  const trimmed = value.trim()
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000
  // A date has a day or month name: without a letter, Date.parse would take "12" or "-5" for a year.
  const date = /[a-z]/i.test(trimmed) ? Date.parse(trimmed) : Number.NaN
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}
