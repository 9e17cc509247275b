/**
 * alpha-image-2: every cell of the spec's pixel table and every input rule.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { AlphaImage2, ValidationError } from "../src/index.js"

/** The spec's table, copied as text: "-" where a ratio is not allowed. */
const table = `
| 1:1 | 1024×1024 | 2048×2048 | - |
| 3:2 | 1536×1024 | 2048×1360 | - |
| 2:3 | 1024×1536 | 1360×2048 | - |
| 4:3 | 1024×768 | 2048×1536 | - |
| 3:4 | 768×1024 | 1536×2048 | - |
| 5:4 | 1280×1024 | 2560×2048 | - |
| 4:5 | 1024×1280 | 2048×2560 | - |
| 16:9 | 1536×864 | 2048×1152 | 3840×2160 |
| 9:16 | 864×1536 | 1152×2048 | 2160×3840 |
| 2:1 | 2048×1024 | 2688×1344 | 3840×1920 |
| 1:2 | 1024×2048 | 1344×2688 | 1920×3840 |
| 21:9 | 2016×864 | 2688×1152 | 3840×1648 |
| 9:21 | 864×2016 | 1152×2688 | 1648×3840 |`

const cells = table.trim().split("\n").flatMap((line) => {
  const [ratio, ...sizes] = line.split("|").map((cell) => cell.trim()).filter((cell) => cell !== "")
  return (["1k", "2k", "4k"] as const).map((resolution, i) => ({ ratio: ratio!, resolution, size: sizes[i]! }))
})

const t2i = (input: unknown) => AlphaImage2.textToImage.normalize(input)
const i2i = (input: unknown) => AlphaImage2.imageToImage.normalize(input)
const image = "https://example.com/in.jpg"

const messageOf = (outcome: Either.Either<unknown, ValidationError>) => {
  expect(Either.isLeft(outcome)).toBe(true)
  return Either.isLeft(outcome) ? outcome.left.message : ""
}

const fourK = "must be one of 16:9, 9:16, 2:1, 1:2, 21:9, 9:21 when resolution is 4k"

describe("alpha-image-2 pixel table", () => {
  it("has 39 cells", () => expect(cells).toHaveLength(39))

  for (const { ratio, resolution, size } of cells) {
    for (const [mode, normalize, extra] of [
      ["text-to-image", t2i, {}],
      ["image-to-image", i2i, { imageUrls: [image] }]
    ] as const) {
      it(`${mode} ${ratio} at ${resolution}: ${size}`, () => {
        const outcome = normalize({ prompt: "p", ratio, resolution, ...extra })
        if (size === "-") {
          expect(messageOf(outcome)).toBe(`input.ratio ${fourK} for alpha-image-2/${mode}`)
          return
        }
        const [width, height] = size.split("×").map(Number)
        const job = Either.getOrThrow(outcome)
        expect([job.width, job.height]).toEqual([width, height])
        expect([job.ratio, job.resolution]).toEqual([ratio, resolution])
      })
    }
  }
})

describe("alpha-image-2 input rules", () => {
  it("defaults: resolution 1k, n 1, no ratio (the upstream chooses)", () => {
    const job = Either.getOrThrow(t2i({ prompt: "p" }))
    expect(job).toMatchObject({ model: "alpha-image-2", mode: "text-to-image", resolution: "1k", n: 1, ratio: null, width: null, height: null, sync: true })
  })

  it("4k without a ratio is accepted", () => {
    expect(Either.getOrThrow(t2i({ prompt: "p", resolution: "4k" })).resolution).toBe("4k")
  })

  for (const n of [1, 2, 5, 10]) {
    it(`n ${n} is accepted`, () => expect(Either.getOrThrow(t2i({ prompt: "p", n })).n).toBe(n))
  }
  for (const n of [0, 11, -1, 1.5, "3", null]) {
    it(`n ${JSON.stringify(n)} is refused`, () =>
      expect(messageOf(t2i({ prompt: "p", n }))).toBe(
        "input.n must be an integer between 1 and 10 for alpha-image-2/text-to-image"
      ))
  }

  it("prompt is required", () => {
    expect(messageOf(t2i({}))).toBe("input.prompt is required for alpha-image-2/text-to-image")
    expect(messageOf(i2i({ imageUrls: [image] }))).toBe("input.prompt is required for alpha-image-2/image-to-image")
  })
  it("prompt must be a non-blank string of at most 10000 characters", () => {
    expect(messageOf(t2i({ prompt: "" }))).toBe("input.prompt must not be empty for alpha-image-2/text-to-image")
    expect(messageOf(t2i({ prompt: "   " }))).toBe("input.prompt must not be empty for alpha-image-2/text-to-image")
    expect(messageOf(t2i({ prompt: 42 }))).toBe("input.prompt must be a string for alpha-image-2/text-to-image")
    expect(messageOf(t2i({ prompt: "x".repeat(10_001) }))).toBe(
      "input.prompt must be at most 10000 characters for alpha-image-2/text-to-image"
    )
    expect(Either.isRight(t2i({ prompt: "x".repeat(10_000) }))).toBe(true)
  })

  it("ratio must be one of the 13", () => {
    expect(messageOf(t2i({ prompt: "p", ratio: "7:5" }))).toBe(
      "input.ratio must be one of 1:1, 3:2, 2:3, 4:3, 3:4, 5:4, 4:5, 16:9, 9:16, 2:1, 1:2, 21:9, 9:21 for alpha-image-2/text-to-image"
    )
    expect(AlphaImage2.ratios).toHaveLength(13)
  })
  it("resolution must be 1k, 2k or 4k", () => {
    expect(messageOf(t2i({ prompt: "p", resolution: "1K" }))).toBe(
      "input.resolution must be one of 1k, 2k, 4k for alpha-image-2/text-to-image"
    )
  })
  it("unknown fields are refused", () => {
    expect(messageOf(t2i({ prompt: "p", foo: 1 }))).toBe("input.foo is not a supported field for alpha-image-2/text-to-image")
    expect(messageOf(t2i({ prompt: "p", imageUrls: [image] }))).toBe(
      "input.imageUrls is not a supported field for alpha-image-2/text-to-image"
    )
  })

  it("image-to-image needs exactly one https URL", () => {
    expect(messageOf(i2i({ prompt: "p" }))).toBe("input.imageUrls is required for alpha-image-2/image-to-image")
    expect(messageOf(i2i({ prompt: "p", imageUrls: [] }))).toBe(
      "input.imageUrls must contain exactly 1 URL for alpha-image-2/image-to-image"
    )
    expect(messageOf(i2i({ prompt: "p", imageUrls: [image, image] }))).toBe(
      "input.imageUrls must contain exactly 1 URL for alpha-image-2/image-to-image"
    )
    expect(messageOf(i2i({ prompt: "p", imageUrls: ["http://example.com/a.png"] }))).toBe(
      "input.imageUrls[0] must be an absolute https URL for alpha-image-2/image-to-image"
    )
    expect(messageOf(i2i({ prompt: "p", imageUrls: ["not a url"] }))).toBe(
      "input.imageUrls[0] must be an absolute https URL for alpha-image-2/image-to-image"
    )
    expect(messageOf(i2i({ prompt: "p", imageUrls: image }))).toBe(
      "input.imageUrls must be an array of URLs for alpha-image-2/image-to-image"
    )
    const job = Either.getOrThrow(i2i({ prompt: "p", imageUrls: [image] }))
    expect(job).toMatchObject({ mode: "image-to-image", imageUrls: [image] })
  })

  it("input that is not an object is refused", () => {
    expect(messageOf(t2i("text"))).toBe("input must be an object for alpha-image-2/text-to-image")
  })

  for (const [resolution, unit] of [["1k", 20_000], ["2k", 40_000], ["4k", 60_000]] as const) {
    it(`price at ${resolution} is ${unit} micro-USD per image times n`, () => {
      const ratio = "16:9"
      expect(Either.getOrThrow(t2i({ prompt: "p", ratio, resolution })).priceMicroUsd).toBe(unit)
      expect(Either.getOrThrow(t2i({ prompt: "p", ratio, resolution, n: 7 })).priceMicroUsd).toBe(unit * 7)
    })
  }
})
