/**
 * The refusal of a submit whose model is not in the catalog, naming the ids the client most
 * likely meant.
 */
import { shortened, ValidationError } from "../domain/Errors.js"

/** Edit distance between two strings (insertions, deletions, substitutions). */
const distance = (a: string, b: string): number => {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = current
  }
  return previous[b.length]!
}

/**
 * The catalog ids a client most likely meant: those the given id starts (a family name such
 * as alpha-image-2), else those within a few edits of it, ignoring case; at most three.
 */
const closestIds = (given: string, ids: ReadonlyArray<string>): ReadonlyArray<string> => {
  const wanted = given.toLowerCase()
  if (wanted === "" || wanted.length > 100) return []
  const prefixed = ids.filter((id) => id.toLowerCase().startsWith(wanted))
  if (prefixed.length > 0) return prefixed.slice(0, 3)
  const limit = Math.max(2, Math.floor(wanted.length / 4))
  return ids
    .map((id) => [id, distance(wanted, id.toLowerCase())] as const)
    .filter(([, d]) => d <= limit)
    .sort((x, y) => x[1] - y[1])
    .slice(0, 3)
    .map(([id]) => id)
}

/** `model 'x' is not supported`, with the ids the client probably meant and where to find them all. */
export const unsupportedModel = (given: string, ids: ReadonlyArray<string>) => {
  const closest = closestIds(given, ids)
  const hint = closest.length === 0
    ? ""
    : ` did you mean ${closest.length === 1 ? closest[0] : `${closest.slice(0, -1).join(", ")} or ${closest[closest.length - 1]}`}?`
  return new ValidationError({ message: `model '${shortened(given)}' is not supported;${hint} GET /api/v1/models lists every model` })
}
