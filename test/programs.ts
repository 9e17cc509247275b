/**
 * How a suite starts one of the programs built by test/setup/entries.ts: the arguments of
 * `node` (`process.execPath`, the Node under test) for it.
 */
import { inject } from "vitest"
import type { Program } from "./setup/entries.js"

/** `node`'s arguments that run `program`, followed by its own `args`. */
export const nodeArgs = (program: Program, ...args: ReadonlyArray<string>): Array<string> => [inject("programs")[program], ...args]
