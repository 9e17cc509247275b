/**
 * The simulator's videos checked by a real third-party tool: ffprobe reads the stream and
 * ffmpeg decodes its frame. .ci/run installs ffmpeg from Debian when it is missing; on a
 * machine without it this suite says so and does not run.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Mp4 } from "@mediagate/upstream"
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const hasFfprobe = (() => {
  try {
    execFileSync("ffprobe", ["-version"], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
})()
if (!hasFfprobe) console.warn("ffprobe.test.ts: ffprobe is not installed; the ffprobe checks are not run")

describe.runIf(hasFfprobe)("ffprobe reads the simulator's MP4 files", () => {
  let dir = ""
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "mediagate-ffprobe-"))
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  for (const [width, height, seconds] of [[1280, 720, 6], [720, 1280, 10], [854, 480, 4], [1920, 1080, 8], [960, 720, 15]] as const) {
    it(`${width}x${height}, ${seconds} s: H.264 of that size and duration, and its frame decodes`, () => {
      const file = join(dir, `${width}x${height}.mp4`)
      writeFileSync(file, Mp4.encodeMp4({ width, height, seconds, seed: width }))
      const probe = JSON.parse(execFileSync("ffprobe", [
        "-v", "error", "-print_format", "json", "-show_streams", "-show_format", file
      ]).toString())
      const stream = probe.streams[0]
      expect([stream.codec_type, stream.codec_name, stream.width, stream.height]).toEqual(["video", "h264", width, height])
      expect(Number(probe.format.duration)).toBe(seconds)
      expect(probe.format.format_name).toContain("mp4")
      execFileSync("ffmpeg", ["-v", "error", "-i", file, "-frames:v", "1", "-f", "null", "-"])
    })
  }
})
