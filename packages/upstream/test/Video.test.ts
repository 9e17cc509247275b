/**
 * The simulator's MP4 files, read back by a third-party parser (mp4box, from GPAC), and
 * the realistic profile's latencies per family.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Testing from "@mediagate/core/testing"
import * as MP4Box from "mp4box"
import { Mp4, Simulator } from "../src/index.js"

const probe = (bytes: Uint8Array) => {
  const file = MP4Box.createFile()
  let info: any
  let error: unknown
  file.onReady = (ready: any) => (info = ready)
  file.onError = (e: unknown) => (error = e)
  const buffer = bytes.slice().buffer as ArrayBuffer & { fileStart: number }
  buffer.fileStart = 0
  file.appendBuffer(buffer as any)
  file.flush()
  expect(error).toBeUndefined()
  return info
}

describe("Mp4", () => {
  for (const [width, height, seconds] of [[1280, 720, 6], [720, 1280, 20], [854, 480, 4], [1920, 1080, 15], [3840, 2160, 8]] as const) {
    it(`${width}x${height}, ${seconds} s: mp4box reads one video track of that size and length`, () => {
      const info = probe(Mp4.encodeMp4({ width, height, seconds, seed: 3 }))
      expect(info.duration / info.timescale).toBe(seconds)
      expect(info.tracks).toHaveLength(1)
      expect(info.videoTracks).toHaveLength(1)
      expect([info.tracks[0].track_width, info.tracks[0].track_height]).toEqual([width, height])
      expect(info.tracks[0].codec).toBe("avc1.42c033")
      expect(info.tracks[0].nb_samples).toBe(1)
    })
  }
  it("starts with an ftyp box of brand isom", () => {
    const bytes = Mp4.encodeMp4({ width: 16, height: 16, seconds: 1, seed: 0 })
    expect(new TextDecoder().decode(bytes.subarray(4, 12))).toBe("ftypisom")
  })
})

describe("realistic latencies", () => {
  const job = (model: string) => Testing.job({ model, sync: false })
  const range = (model: string) => {
    const values = Array.from({ length: 200 }, (_, i) => Simulator.latencyMillis({ profile: "realistic" }, job(model), `task-${i}`))
    return [Math.min(...values), Math.max(...values)]
  }
  const cases: ReadonlyArray<[string, number, number]> = [
    ["beta-imagine/text-to-image-pro", 5_000, 20_000],
    ["beta-imagine/text-to-video", 60_000, 300_000],
    ["compact-image-2", 10_000, 30_000],
    ["motion-2.0", 120_000, 4 * 3_600_000],
    ["clip3_fast", 120_000, 300_000],
    ["dream-4", 10_000, 30_000]
  ]
  for (const [model, min, max] of cases) {
    it(`${model}: between ${min / 1000} s and ${max / 1000} s`, () => {
      const [low = 0, high = 0] = range(model)
      expect(low).toBeGreaterThanOrEqual(min)
      expect(high).toBeLessThanOrEqual(max)
      expect(high - low).toBeGreaterThan((max - min) / 4)
    })
  }
})
