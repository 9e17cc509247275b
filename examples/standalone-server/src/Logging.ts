/**
 * The standalone server's logger (MEDIAGATE_LOG_FORMAT, MEDIAGATE_LOG_LEVEL): Effect's
 * logfmt lines by default, one JSON object a line for log collectors, and the least severe
 * level written. Log lines never carry keys, signing secrets or database passwords: the
 * modules that log name tasks, callbacks and models, never credentials.
 */
import { Layer, Logger, LogLevel } from "effect"
import type { LogFormat, LogLevelName } from "./Config.js"

const levels: Record<LogLevelName, LogLevel.LogLevel> = {
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warning: LogLevel.Warning,
  error: LogLevel.Error,
  none: LogLevel.None
}

/** The Effect log level of a MEDIAGATE_LOG_LEVEL value. */
export const logLevel = (name: LogLevelName): LogLevel.LogLevel => levels[name]

/** Replaces the default logger by the configured format and sets the minimum level. */
export const layer = (config: { readonly logFormat: LogFormat; readonly logLevel: LogLevelName }): Layer.Layer<never> =>
  Layer.merge(config.logFormat === "json" ? Logger.json : Logger.logFmt, Logger.minimumLogLevel(levels[config.logLevel]))
