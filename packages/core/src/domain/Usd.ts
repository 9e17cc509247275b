/**
 * Amounts of money: integer micro-USD (1 USD = 1,000,000) as people read and write them. Kept
 * in domain so that key scopes (`KeyScopes`) and credits (`tasks/Credits`, which re-exports
 * these) share one reading of a dollar amount.
 */
import { Either } from "effect"

/** `micro` micro-USD as dollars, with at least two decimals: 20000 is `$0.02`, 1500 is `$0.0015`. */
export const formatUsd = (micro: number): string => {
  const sign = micro < 0 ? "-" : ""
  const digits = String(Math.abs(micro)).padStart(7, "0")
  const fraction = digits.slice(-6).replace(/0+$/, "").padEnd(2, "0")
  return `${sign}$${digits.slice(0, -6)}.${fraction}`
}

/** `micro` micro-USD as a plain decimal with six decimals, no sign of currency: 50000 is `0.050000`. */
export const usdDecimal = (micro: number): string => {
  const sign = micro < 0 ? "-" : ""
  const digits = String(Math.abs(micro)).padStart(7, "0")
  return `${sign}${digits.slice(0, -6)}.${digits.slice(-6)}`
}

/**
 * Dollars as an operator writes them (`10`, `0.50`, `$5`, `1e-3` is refused) into whole
 * micro-USD, exactly: at most six decimals, more than zero, at most a billion dollars.
 */
export const parseUsd = (raw: string): Either.Either<number, string> => {
  const match = /^\$?(\d{1,10})(?:\.(\d{1,6}))?$/.exec(raw.trim())
  if (match === null) return Either.left(`must be an amount in US dollars with at most six decimals, such as 10 or 0.25 (got ${JSON.stringify(raw)})`)
  const micro = Number(match[1]) * 1_000_000 + Number((match[2] ?? "").padEnd(6, "0"))
  if (micro <= 0) return Either.left("must be more than zero")
  if (micro > 1_000_000_000 * 1_000_000) return Either.left("must be at most 1000000000 dollars")
  return Either.right(micro)
}
