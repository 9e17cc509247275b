/**
 * The `mediagate` executable: the command line run on Node; a failure is one line on
 * stderr and exit 1.
 */
import { ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Console, Effect } from "effect"
import { cli, describeFailure } from "./Cli.js"

cli(process.argv).pipe(
  Effect.provide(NodeContext.layer),
  Effect.catchAll((error) =>
    ValidationError.isValidationError(error)
      // The CLI printed what was wrong with the command line.
      ? Effect.sync(() => process.exit(1))
      : Console.error(`mediagate: ${describeFailure(error)}`).pipe(Effect.zipRight(Effect.sync(() => process.exit(1))))
  ),
  NodeRuntime.runMain({ disablePrettyLogger: true })
)
