/**
 * What a command line asks for, read before @effect/cli parses it: help (ours, see Help.ts),
 * or a command whose options all exist. @effect/cli reports a mistyped option as
 * "Received unknown argument: '--inptu'", or, when it comes before an argument, takes it for
 * the argument and complains about the option's value instead; this names the option and the
 * one that was probably meant.
 */
import { AutoCorrect, CliConfig } from "@effect/cli"
import type { CommandHelp, ProgramHelp } from "./Help.js"
import { builtIns } from "./Help.js"

/** What the command line asks for. */
export type Reading =
  /** Help on the program (no command) or on one command. */
  | { readonly _tag: "Help"; readonly command: CommandHelp | undefined }
  /** A command line with a mistake @effect/cli would report less clearly. */
  | { readonly _tag: "Mistake"; readonly message: string }
  /** Anything else: for @effect/cli to parse and run. */
  | { readonly _tag: "Parse" }

const config = CliConfig.defaultConfig

/** The candidate closest to `typed` if it is close (a typo: two edits at most, or the start of only one). */
export const suggestion = (typed: string, candidates: ReadonlyArray<string>): string | undefined => {
  const ranked = candidates
    .map((candidate) => ({ candidate, distance: AutoCorrect.levensteinDistance(typed, candidate, config) }))
    .sort((a, b) => a.distance - b.distance)
  if (ranked[0] !== undefined && ranked[0].distance <= config.autoCorrectLimit) return ranked[0].candidate
  const started = typed.replace(/^-+/, "").length >= 2 ? candidates.filter((candidate) => candidate.startsWith(typed.toLowerCase())) : []
  return started.length === 1 ? started[0] : undefined
}

/** The message for an option `command` (or the program, before a command) does not take. */
const unknownOption = (program: string, command: CommandHelp | undefined, typed: string) => {
  if (command === undefined) return `unknown option ${typed} (${program} --help lists the commands and options)`
  const names = command.options.flatMap((option) => option.names.filter((name) => name.startsWith("--")))
  const near = suggestion(typed.toLowerCase(), names)
  return near !== undefined
    ? `unknown option ${typed} for ${command.name}; did you mean ${near}?`
    : `unknown option ${typed} for ${command.name} (${program} ${command.name} --help lists its options)`
}

/** Reads `args` (the command line after the program's name) against the program's commands. */
export const read = (help: ProgramHelp, args: ReadonlyArray<string>): Reading => {
  let command: CommandHelp | undefined
  let helpAsked = false
  // The first mistake; help asked anywhere still wins.
  let mistake: string | undefined
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!
    // Past `--` everything is an argument.
    if (arg === "--") break
    if (!arg.startsWith("-") || arg === "-") {
      // The first word names the command; later ones are its arguments.
      if (command !== undefined || mistake !== undefined) continue
      command = help.commands.find((candidate) => candidate.name === arg)
      if (command === undefined) {
        const names = help.commands.map((candidate) => candidate.name)
        const near = suggestion(arg, names)
        mistake = near !== undefined
          ? `unknown command ${arg}; did you mean ${near}?`
          : `unknown command ${arg}; the commands are ${names.join(", ")} (${help.program} --help)`
      }
      continue
    }
    const name = arg.split("=")[0]!.toLowerCase()
    const inline = arg.includes("=")
    if (name === "-h" || name === "--help") {
      helpAsked = true
      continue
    }
    const own = command?.options.find((option) => option.names.includes(name))
    const takesValue = own !== undefined ? own.value !== undefined : builtIns.get(name)
    if (takesValue === undefined) {
      mistake ??= unknownOption(help.program, command, arg.split("=")[0]!)
      continue
    }
    // The option's value is the next word, whatever it looks like.
    if (takesValue && !inline) index++
  }
  if (helpAsked || args.length === 0) return { _tag: "Help", command }
  return mistake === undefined ? { _tag: "Parse" } : { _tag: "Mistake", message: mistake }
}
