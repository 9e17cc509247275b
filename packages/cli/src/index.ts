/** The `mediagate` command line as a library: the command, its runner and how failures read. */
export * from "./Cli.js"
