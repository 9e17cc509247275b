/**
 * `mediagate --help` and the reading of a command line, on the real commands: help lists
 * each command's own options with what they take and their descriptions, none of
 * @effect/cli's built-ins or type boilerplate, in colour only on a terminal without
 * NO_COLOR; a mistyped command or option is named with the one probably meant.
 */
import { describe, expect, it } from "@effect/vitest"
import { help } from "../src/Cli.js"
import * as CommandLine from "../src/CommandLine.js"
import * as Help from "../src/Help.js"

const plain: Help.Style = { color: false, width: 80 }
const run = help.commands.find((command) => command.name === "run")!

describe("Help", () => {
  it("reads each command's arguments and options from the commands", () => {
    expect(help.commands.map((command) => command.name)).toEqual(["run", "estimate", "models", "get", "cancel", "list"])
    expect(run.args).toEqual([{ names: ["<model>"], value: undefined, description: expect.stringContaining("A model id") }])
    expect(run.options.map((option) => [option.names.join(", "), option.value])).toEqual([
      ["--prompt", "text"],
      ["--image", "path|url..."],
      ["--input", "json"],
      ["--out", "dir"],
      ["--no-wait", undefined],
      ["--idempotency-key", "key"],
      ["--timeout", "duration"],
      ["--json", undefined],
      ["--url", "url"],
      ["--key", "key"]
    ])
    expect(run.options.find((option) => option.names.includes("--key"))!.description).toBe("The API key (default: $MEDIAGATE_API_KEY)")
  })

  it("shows no built-in option, type boilerplate or escape code without colour", () => {
    const texts = [Help.renderProgram(help, "0.1.0", plain), ...help.commands.map((command) => Help.renderCommand("mediagate", command, plain))]
    for (const text of texts) {
      expect(text).not.toContain("\x1b")
      for (const noise of ["--wizard", "--completions", "--log-level", "redacted", "A user-defined piece of text", "This setting is optional"]) {
        expect(text).not.toContain(noise)
      }
      expect(text).toContain("-h, --help")
    }
    expect(Help.renderCommand("mediagate", run, plain)).toContain("  --key <key>              The API key (default: $MEDIAGATE_API_KEY)\n")
  })

  it("colours only a terminal whose NO_COLOR is unset or empty", () => {
    expect(Help.wantsColor(true, undefined)).toBe(true)
    expect(Help.wantsColor(true, "")).toBe(true)
    expect(Help.wantsColor(true, "1")).toBe(false)
    expect(Help.wantsColor(false, undefined)).toBe(false)
    expect(Help.wantsColor(undefined, undefined)).toBe(false)
    expect(Help.renderCommand("mediagate", run, { color: true, width: 80 })).toContain("\x1b[1m--key <key>\x1b[22m")
  })

  it("wraps descriptions under their column", () => {
    const lines = Help.renderCommand("mediagate", run, { color: false, width: 60 }).split("\n")
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(60)
    const at = lines.findIndex((line) => line.startsWith("  --idempotency-key <key>"))
    expect(lines[at + 1]).toMatch(/^ {27}\S/)
  })
})

describe("CommandLine", () => {
  const read = (line: string) => CommandLine.read(help, line === "" ? [] : line.split(" "))

  it("help: none asked or -h/--help anywhere before --", () => {
    expect(read("")).toEqual({ _tag: "Help", command: undefined })
    expect(read("--help")).toEqual({ _tag: "Help", command: undefined })
    expect(read("run -h")).toEqual({ _tag: "Help", command: run })
    expect(read("run --inptu x --help")).toEqual({ _tag: "Help", command: run })
    expect(read("run dream-4 --prompt x -- --help")).toEqual({ _tag: "Parse" })
  })

  it("a mistyped option or command is named with the one probably meant", () => {
    expect(read("run dream-4 --inptu {}")).toEqual({ _tag: "Mistake", message: "unknown option --inptu for run; did you mean --input?" })
    expect(read("run --inptu {}")).toEqual({ _tag: "Mistake", message: "unknown option --inptu for run; did you mean --input?" })
    expect(read("models --jsno")).toEqual({ _tag: "Mistake", message: "unknown option --jsno for models; did you mean --json?" })
    expect(read("run x --idempotency=k")).toEqual({ _tag: "Mistake", message: "unknown option --idempotency for run; did you mean --idempotency-key?" })
    expect(read("get x --limit 3")).toEqual({ _tag: "Mistake", message: "unknown option --limit for get (mediagate get --help lists its options)" })
    expect(read("lsit")).toEqual({ _tag: "Mistake", message: "unknown command lsit; did you mean list?" })
    expect(read("submit --inptu x")).toEqual({
      _tag: "Mistake",
      message: "unknown command submit; the commands are run, estimate, models, get, cancel, list (mediagate --help)"
    })
  })

  it("an option's value is not read as an option; built-ins and inline values pass", () => {
    expect(read("run dream-4 --prompt --inptu")).toEqual({ _tag: "Parse" })
    expect(read("run dream-4 --input={} --JSON --key k --url http://x")).toEqual({ _tag: "Parse" })
    expect(read("--version")).toEqual({ _tag: "Parse" })
    expect(read("list --log-level debug --limit 5")).toEqual({ _tag: "Parse" })
  })
})
