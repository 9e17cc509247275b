/**
 * The simulator's videos checked by a real third-party tool: ffprobe reads the stream and
 * decodes its frame. The ffprobe is the npm package @ffprobe-installer/ffprobe's (a static
 * build for this platform), so the suite runs on every machine; on a platform the package
 * has no build for, importing it fails, and so does this file.
 */
import ffprobe from "@ffprobe-installer/ffprobe"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Mp4 } from "@mediagate/upstream"
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

describe("ffprobe reads the simulator's MP4 files", () => {
  let dir = ""
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "mediagate-ffprobe-"))
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  for (const [width, height, seconds] of [[1280, 720, 6], [720, 1280, 10], [854, 480, 4], [1920, 1080, 8], [960, 720, 15]] as const) {
    it(`${width}x${height}, ${seconds} s: H.264 of that size and duration, and its frame decodes`, () => {
      const file = join(dir, `${width}x${height}.mp4`)
      writeFileSync(file, Mp4.encodeMp4({ width, height, seconds, seed: width }))
      // -show_frames decodes every frame; a decoding error is printed at -v error.
      const run = spawnSync(ffprobe.path, [
        "-v", "error", "-print_format", "json", "-show_streams", "-show_format", "-show_frames", file
      ], { encoding: "utf8" })
      expect(run.error).toBeUndefined()
      expect(run.stderr).toBe("")
      expect(run.status).toBe(0)
      const probe = JSON.parse(run.stdout)
      const stream = probe.streams[0]
      expect([stream.codec_type, stream.codec_name, stream.width, stream.height]).toEqual(["video", "h264", width, height])
      expect(Number(probe.format.duration)).toBe(seconds)
      expect(probe.format.format_name).toContain("mp4")
      expect(probe.frames.map((frame: Record<string, unknown>) => [frame["media_type"], frame["width"], frame["height"], frame["key_frame"]]))
        .toEqual([["video", width, height, 1]])
    })
  }
})
