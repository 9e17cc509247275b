/** MP4 files for simulated videos. */
export * as Mp4 from "./Mp4.js"
/** PNG encoding and reading. */
export * as Png from "./Png.js"
/** Moderation driven by prompt markers. */
export * as SimulatedModeration from "./SimulatedModeration.js"
/** The simulated upstream. */
export * as Simulator from "./Simulator.js"
