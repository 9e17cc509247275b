/**
 * `--help` for a command line of one level of commands, read from @effect/cli's own
 * description of each command (`CommandDescriptor.getHelp` without the built-in options), so
 * it cannot drift from what the parser takes. @effect/cli's help writes ANSI colours whatever
 * the output is, lists --wizard, --completions and --log-level under every command, and
 * prints each option's type ("A user-defined piece of text.") as its first line; this one is
 * plain text unless asked for colour, and shows what a user of the command needs.
 */
import { CliConfig, CommandDescriptor, HelpDoc, Span } from "@effect/cli"

/** An argument or an option as help shows it. */
export interface Entry {
  /** An argument's name (`<model>`), or an option's names (`--key`; `-h`, `--help`). */
  readonly names: ReadonlyArray<string>
  /** What the option takes (`json` for `--input <json>`); undefined for a flag or an argument. */
  readonly value: string | undefined
  readonly description: string
}

/** A command as help shows it. */
export interface CommandHelp {
  readonly name: string
  readonly description: string
  readonly args: ReadonlyArray<Entry>
  readonly options: ReadonlyArray<Entry>
}

/** A program and its commands as help shows them. */
export interface ProgramHelp {
  readonly program: string
  readonly description: string
  readonly commands: ReadonlyArray<CommandHelp>
}

/** Anything with an @effect/cli descriptor: a `Command`. */
interface Described {
  readonly descriptor: CommandDescriptor.Command<unknown>
}

const withoutBuiltIns = CliConfig.make({ showBuiltIns: false })

const spanText = (span: Span.Span): string => {
  switch (span._tag) {
    case "Text":
    case "URI":
      return span.value
    case "Sequence":
      return spanText(span.left) + spanText(span.right)
    default:
      return spanText(span.value)
  }
}

/** The document's blocks in order, sequences flattened. */
const blocks = (doc: HelpDoc.HelpDoc): ReadonlyArray<HelpDoc.HelpDoc> =>
  doc._tag === "Sequence" ? [...blocks(doc.left), ...blocks(doc.right)] : doc._tag === "Empty" ? [] : [doc]

const paragraphs = (doc: HelpDoc.HelpDoc): ReadonlyArray<string> =>
  blocks(doc).flatMap((block) => (block._tag === "Paragraph" ? [spanText(block.value)] : []))

/** The blocks under each header ("DESCRIPTION", "ARGUMENTS", "OPTIONS", "COMMANDS"). */
const sections = (doc: HelpDoc.HelpDoc): ReadonlyMap<string, ReadonlyArray<HelpDoc.HelpDoc>> => {
  const found = new Map<string, Array<HelpDoc.HelpDoc>>()
  let current = ""
  for (const block of blocks(doc)) {
    if (block._tag === "Header") {
      current = spanText(block.value)
      found.set(current, [])
    } else {
      found.get(current)?.push(block)
    }
  }
  return found
}

const optional = /^This setting is optional\.(?: Defaults to: (.*))?$/
const fromEnvironment = "This option can be set from environment variables."

/**
 * One definition of @effect/cli's help: its term is the names then the value's name
 * (`--key key`, `(-h, --help)`) or an argument's name (`<model>`); its first paragraph is the
 * type's boilerplate, then come the descriptions given, then @effect/cli's notes on defaults.
 */
const entryOf = ([term, doc]: readonly [Span.Span, HelpDoc.HelpDoc]): Entry => {
  const text = spanText(term).replace(/^\((.*)\)$/, "$1")
  const option = /^(-[^\s,]+(?:, -[^\s,]+)*)(?: (.+))?$/.exec(text)
  const [, ...rest] = paragraphs(doc)
  let fallback: string | undefined
  const given = rest.filter((line) => {
    const note = optional.exec(line)
    if (note !== null) fallback = note[1]
    return note === null && line !== fromEnvironment
  }).join(" ")
  // A default the description does not already state.
  const description = fallback !== undefined && !/\bdefault\b/i.test(given) ? `${given} (default: ${fallback})` : given
  return option === null
    ? { names: [text], value: undefined, description }
    : { names: option[1]!.split(", "), value: option[2], description }
}

const definitions = (docs: ReadonlyArray<HelpDoc.HelpDoc> | undefined) =>
  (docs ?? []).flatMap((doc) => (doc._tag === "DescriptionList" ? doc.definitions.map(entryOf) : []))

const describe = (docs: ReadonlyArray<HelpDoc.HelpDoc> | undefined) =>
  (docs ?? []).flatMap((doc) => paragraphs(doc)).join(" ")

/** What help shows of `command`, named `name`. */
export const commandHelp = (name: string, command: Described): CommandHelp => {
  const parts = sections(CommandDescriptor.getHelp(command.descriptor, withoutBuiltIns))
  return {
    name,
    description: describe(parts.get("DESCRIPTION")),
    args: definitions(parts.get("ARGUMENTS")),
    options: definitions(parts.get("OPTIONS"))
  }
}

/** What help shows of `root` and its `commands`, in this order. */
export const programHelp = (program: string, root: Described, commands: ReadonlyArray<Described>): ProgramHelp => ({
  program,
  description: commandHelp(program, root).description,
  commands: commands.map((command) => {
    const [name] = CommandDescriptor.getNames(command.descriptor)
    return commandHelp(name!, command)
  })
})

/** The options every command takes from @effect/cli besides its own, with whether each takes a value. */
export const builtIns: ReadonlyMap<string, boolean> = new Map([
  ["-h", false],
  ["--help", false],
  ["--version", false],
  ["--wizard", false],
  ["--completions", true],
  ["--log-level", true]
])

const helpEntry: Entry = { names: ["-h", "--help"], value: undefined, description: "Show this help" }

/** How help is written: colour only on a terminal that wants it, lines wrapped at `width`. */
export interface Style {
  readonly color: boolean
  readonly width: number
}

/** Whether to colour the output: a terminal, and NO_COLOR unset or empty (https://no-color.org). */
export const wantsColor = (isTTY: boolean | undefined, noColor: string | undefined): boolean => isTTY === true && (noColor ?? "") === ""

const bold = (style: Style, text: string) => (style.color ? `\x1b[1m${text}\x1b[22m` : text)

/** `text` in lines of at most `width` characters (a longer word stays whole), after the first indented by `indent`. */
const wrap = (text: string, width: number, indent: number): string => {
  const lines: Array<string> = []
  let line = ""
  for (const word of text.split(/\s+/).filter((w) => w !== "")) {
    if (line !== "" && line.length + 1 + word.length > width) {
      lines.push(line)
      line = word
    } else {
      line = line === "" ? word : `${line} ${word}`
    }
  }
  lines.push(line)
  return lines.join(`\n${" ".repeat(indent)}`)
}

const termOf = (entry: Entry) => `${entry.names.join(", ")}${entry.value === undefined ? "" : ` <${entry.value}>`}`

/** A titled two-column list: terms, then their descriptions aligned and wrapped. */
const table = (style: Style, title: string, rows: ReadonlyArray<readonly [string, string]>) => {
  const left = Math.max(...rows.map(([term]) => term.length)) + 4
  // A narrow terminal still gets a readable description column.
  const room = Math.max(style.width - left, 30)
  return [
    bold(style, title),
    ...rows.map(([term, description]) => `  ${bold(style, term)}${" ".repeat(left - 2 - term.length)}${wrap(description, room, left)}`)
  ].join("\n")
}

const paragraph = (style: Style, text: string) => wrap(text, style.width, 0)

/** The program's help: its commands. */
export const renderProgram = (help: ProgramHelp, version: string, style: Style): string =>
  [
    `${bold(style, "Usage:")} ${help.program} <command> [options]`,
    paragraph(style, help.description),
    table(style, "Commands:", help.commands.map((command) => [command.name, command.description])),
    table(style, "Options:", [[termOf(helpEntry), helpEntry.description], ["--version", `Print the version (${version})`]]),
    paragraph(style, `\`${help.program} <command> --help\` shows a command's arguments and options.`)
  ].join("\n\n")

/** One command's help: its arguments and options. */
export const renderCommand = (program: string, command: CommandHelp, style: Style): string =>
  [
    `${bold(style, "Usage:")} ${program} ${command.name}${command.args.map((arg) => ` ${arg.names[0]}`).join("")}${command.options.length > 0 ? " [options]" : ""}`,
    paragraph(style, command.description),
    ...(command.args.length === 0 ? [] : [table(style, "Arguments:", command.args.map((arg) => [termOf(arg), arg.description]))]),
    table(style, "Options:", [...command.options, helpEntry].map((option) => [termOf(option), option.description]))
  ].join("\n\n")
