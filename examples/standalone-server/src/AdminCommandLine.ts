/**
 * The admin CLI's command line before and around @effect/cli: a mistyped command named at
 * its own level, and help and complaints in plain text unless stdout is a terminal.
 */
import { AutoCorrect, CliConfig, CommandDescriptor, HelpDoc, Options, ValidationError } from "@effect/cli"
import { Console, Effect, Either } from "effect"
import { stripVTControlCharacters } from "node:util"
import { parseDuration } from "./ConfigVariables.js"

/** The groups of commands by name, each with its description and its commands. */
export type Groups = Readonly<Record<string, readonly [string, ReadonlyArray<Described>]>>

/** Anything with an @effect/cli descriptor: a `Command`. */
interface Described {
  readonly descriptor: CommandDescriptor.Command<unknown>
}

/** The candidate one or two edits from `typed`, as @effect/cli's own auto-correction measures it. */
const nearest = (typed: string, candidates: ReadonlyArray<string>) =>
  candidates
    .map((candidate) => ({ candidate, distance: AutoCorrect.levensteinDistance(typed, candidate, CliConfig.defaultConfig) }))
    .filter(({ distance }) => distance <= CliConfig.defaultConfig.autoCorrectLimit)
    .sort((a, b) => a.distance - b.distance)[0]?.candidate

/**
 * A mistyped command, read before @effect/cli parses the line: it reports an unknown command
 * of a group as a mistake of the level above ("Invalid subcommand for admin - use one of
 * 'account', ..." for `account creat`). Undefined when the commands named exist.
 */
export const commandMistake = (groups: Groups, args: ReadonlyArray<string>): string | undefined => {
  const [group, name] = args
  if (group === undefined || group.startsWith("-")) return undefined
  const groupNames = Object.keys(groups)
  if (groups[group] === undefined) {
    const near = nearest(group, groupNames)
    return near !== undefined
      ? `unknown command ${group}; did you mean ${near}?`
      : `unknown command ${group}; the commands are ${groupNames.join(", ")} (mediagate admin --help)`
  }
  if (name === undefined || name.startsWith("-")) return undefined
  const names = groups[group]![1].flatMap((each) => [...CommandDescriptor.getNames(each.descriptor)])
  if (names.includes(name)) return undefined
  const near = nearest(name, names)
  return near !== undefined
    ? `unknown command ${group} ${name}; did you mean ${group} ${near}?`
    : `unknown command ${group} ${name}; the commands of ${group} are ${names.join(", ")} (mediagate admin ${group} --help)`
}

/**
 * @effect/cli writes its help and its complaints in ANSI colours whatever the output is:
 * plain text unless stdout is a terminal and NO_COLOR is unset (https://no-color.org).
 */
const colour = process.stdout.isTTY === true && (process.env["NO_COLOR"] ?? "") === ""
export const plainText = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  colour ? effect : Console.consoleWith((console) =>
    Console.withConsole(effect, {
      ...console,
      log: (...args) => console.log(...args.map((arg) => (typeof arg === "string" ? stripVTControlCharacters(arg) : arg))),
      error: (...args) => console.error(...args.map((arg) => (typeof arg === "string" ? stripVTControlCharacters(arg) : arg)))
    })
  )

/** `--json`, on every command. */
export const json = Options.boolean("json").pipe(Options.withDescription("Print one JSON document instead of text"))

/** A `--<name>` length of time written as a number and a unit: 90m, 12h, 30d. */
export const durationOf = (name: string) => (raw: string) => {
  const value = parseDuration(raw)
  return value === undefined
    ? Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--${name} must be a number and a unit, such as 90m, 12h or 30d (got ${JSON.stringify(raw)})`)))
    : Effect.succeed(value)
}

/** A `--<name>` value read by `parse` (a rule of core's, such as `KeyScopes.parseRateLimit`), its complaint as the CLI's. */
export const parsedBy = <A>(parse: (raw: string) => Either.Either<A, string>) => (raw: string) =>
  Either.match(parse(raw), {
    onLeft: (rule) => Effect.fail(ValidationError.invalidValue(HelpDoc.p(rule))),
    onRight: Effect.succeed
  })

/** `--limit`: how many of the latest to show, 1 to 1000. */
export const limit = (what: string) =>
  Options.integer("limit").pipe(
    Options.withDescription(`How many of the latest ${what} to show, 1 to 1000`),
    Options.withDefault(20),
    Options.mapEffect((value) =>
      value >= 1 && value <= 1000
        ? Effect.succeed(value)
        : Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--limit must be a whole number from 1 to 1000 (got ${value})`)))
    )
  )
