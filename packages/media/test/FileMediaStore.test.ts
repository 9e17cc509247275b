import { afterAll, describe, expect, it } from "@effect/vitest"
import { Ids, MediaStore } from "@mediagate/core"
import { Effect, Option } from "effect"
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { FileMediaStore } from "../src/index.js"

const directory = mkdtempSync(join(tmpdir(), "mediagate-media-"))
afterAll(() => rmSync(directory, { recursive: true, force: true }))
const store = FileMediaStore.layer({ directory: join(directory, "nested"), baseUrl: "http://127.0.0.1:8080/media/" })

describe("FileMediaStore", () => {
  it.effect("put writes a file whose URL key get reads back, with its content type", () =>
    Effect.gen(function*() {
      const media = yield* MediaStore.MediaStore
      const bytes = new Uint8Array([137, 80, 78, 71])
      const url = yield* media.put({ bytes, contentType: "image/png", extension: "png" })
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:8080\/media\/[0-9a-f]{32}\.png$/)
      const key = url.split("/").pop()!
      expect(existsSync(join(directory, "nested", key))).toBe(true)
      expect(Option.getOrThrow(yield* media.get(key))).toEqual({ bytes, contentType: "image/png" })
      expect(readdirSync(join(directory, "nested")).some((name) => name.endsWith(".partial"))).toBe(false)
    }).pipe(Effect.provide(store), Effect.provide(Ids.layerTest)))

  it.effect("keys that are not ours are never read, whatever is on disk", () =>
    Effect.gen(function*() {
      writeFileSync(join(directory, "secret.txt"), "secret")
      const media = yield* MediaStore.MediaStore
      for (const key of ["../secret.txt", "..%2Fsecret.txt", "secret.txt", `${"a".repeat(32)}.png/../../secret.txt`, "", "0".repeat(32) + ".png"]) {
        expect(Option.isNone(yield* media.get(key))).toBe(true)
      }
    }).pipe(Effect.provide(store), Effect.provide(Ids.layerTest)))
})
