/**
 * Libraries a process may never need, imported the first time they are: sharp (it loads
 * libvips, about 0.2 s of CPU at start) and music-metadata (about 400 KB of JavaScript to
 * compile). The admin CLI, the client CLI and a server that is sent no file to check load
 * neither. A library that cannot be loaded is a defect, not a verdict on the bytes.
 */
import { Effect } from "effect"
import type Sharp from "sharp"

const once = <A>(load: () => Promise<A>): Effect.Effect<A> => {
  let loading: Promise<A> | undefined
  return Effect.promise(() => (loading ??= load()))
}

/** sharp's entry function. */
export const sharp: Effect.Effect<typeof Sharp> = once(() => import("sharp").then((module) => module.default))

/** music-metadata's `parseBuffer`. */
export const parseBuffer: Effect.Effect<typeof import("music-metadata").parseBuffer> = once(() =>
  import("music-metadata").then((module) => module.parseBuffer)
)
