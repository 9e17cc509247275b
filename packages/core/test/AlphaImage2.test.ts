/**
 * alpha-image-2 (spec section 4.3 and section 8): every cell of the pixel table, every
 * input rule with its exact message, and the price.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import type { ModelSpec } from "../src/index.js"
import { AlphaImage2, ModelInfo, Pricing, ValidationError } from "../src/index.js"

/** The spec's pixel table, copied verbatim: width×height, "-" where the ratio is not allowed. */
const specTable = `
| ratio | 1k | 2k | 4k |
|---|---|---|---|
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
| 9:21 | 864×2016 | 1152×2688 | 1648×3840 |
`

type Cell = { readonly ratio: string; readonly resolution: string; readonly size: readonly [number, number] | null }

const cells: ReadonlyArray<Cell> = (() => {
  const [header, , ...rows] = specTable.trim().split("\n").map((line) =>
    line.split("|").map((cell) => cell.trim()).filter((cell) => cell !== "")
  )
  const resolutions = header!.slice(1)
  return rows.flatMap(([ratio, ...sizes]) =>
    resolutions.map((resolution, i): Cell => {
      const text = sizes[i]!
      const size = text === "-" ? null : (text.split("×").map(Number) as unknown as readonly [number, number])
      return { ratio: ratio!, resolution, size }
    })
  )
})()

const T2I = "alpha-image-2/text-to-image"
const I2I = "alpha-image-2/image-to-image"
const image = "https://images.example/in.jpg"
const allRatios = "1:1, 3:2, 2:3, 4:3, 3:4, 5:4, 4:5, 16:9, 9:16, 2:1, 1:2, 21:9, 9:21"
const fourKMessage = (model: string) =>
  `input.ratio must be one of 16:9, 9:16, 2:1, 1:2, 21:9, 9:21 when resolution is 4k for ${model}`
const unitPrice: Readonly<Record<string, number>> = { "1k": 20_000, "2k": 40_000, "4k": 60_000 }

/**
 * Normalises `input` and prices the job the way TaskService does. alpha-image-2 has no
 * rule that accepts a request only to fail the task, so `rejection` is never set.
 */
const submitTo = (spec: ModelSpec) => (input: unknown) =>
  Either.map(spec.normalize(input), ({ job, rejection }) => {
    expect(rejection).toBeUndefined()
    return { ...job, priceMicroUsd: spec.price(job, Pricing.defaultPrices) }
  })
const t2i = submitTo(AlphaImage2.textToImage)
const i2i = submitTo(AlphaImage2.imageToImage)

/** The ValidationError message of a refused input (fails the test when the input was accepted). */
const refusal = (outcome: Either.Either<unknown, ValidationError>): string => {
  if (Either.isRight(outcome)) throw new Error(`expected a refusal, got ${JSON.stringify(outcome.right)}`)
  expect(outcome.left).toBeInstanceOf(ValidationError)
  expect(outcome.left._tag).toBe("ValidationError")
  return outcome.left.message
}

describe("the pixel table copied from the spec", () => {
  it("has 13 ratios × 3 resolutions = 39 cells, 7 of them dashes", () => {
    expect(cells).toHaveLength(39)
    expect(cells.filter((c) => c.size === null)).toHaveLength(7)
    expect(new Set(cells.map((c) => c.ratio)).size).toBe(13)
  })
})

describe(`${T2I}: every cell of the pixel table`, () => {
  for (const { ratio, resolution, size } of cells) {
    it(`ratio ${ratio} at ${resolution}: ${size === null ? "not allowed" : size.join("×")}`, () => {
      const outcome = t2i({ prompt: "a red fox", ratio, resolution })
      if (size === null) {
        expect(refusal(outcome)).toBe(fourKMessage(T2I))
        return
      }
      const job = Either.getOrThrow(outcome)
      expect(job).toMatchObject({
        model: "alpha-image-2",
        mode: "text-to-image",
        output: "image",
        prompt: "a red fox",
        n: 1,
        ratio,
        resolution,
        width: size[0],
        height: size[1],
        duration: null,
        imageUrls: [],
        fallbackModel: null,
        sync: true,
        priceMicroUsd: unitPrice[resolution],
        adjustments: []
      })
    })
  }
})

describe(`${I2I}: the same table`, () => {
  for (const { ratio, resolution, size } of cells) {
    it(`ratio ${ratio} at ${resolution}: ${size === null ? "not allowed" : size.join("×")}`, () => {
      const outcome = i2i({ prompt: "make it night", ratio, resolution, imageUrls: [image] })
      if (size === null) {
        expect(refusal(outcome)).toBe(fourKMessage(I2I))
        return
      }
      const job = Either.getOrThrow(outcome)
      expect(job).toMatchObject({ mode: "image-to-image", ratio, resolution, width: size[0], height: size[1], imageUrls: [image] })
    })
  }
})

describe(`${T2I}: defaults`, () => {
  it("resolution defaults to 1k, n to 1, and without a ratio the upstream chooses (no size)", () => {
    const job = Either.getOrThrow(t2i({ prompt: "p" }))
    expect(job).toMatchObject({ resolution: "1k", n: 1, ratio: null, width: null, height: null, priceMicroUsd: 20_000 })
  })

  it("a ratio without a resolution gets the 1k size", () => {
    expect(Either.getOrThrow(t2i({ prompt: "p", ratio: "21:9" }))).toMatchObject({ resolution: "1k", width: 2016, height: 864 })
  })

  it("4k without a ratio is accepted with width and height null", () => {
    const job = Either.getOrThrow(t2i({ prompt: "p", resolution: "4k" }))
    expect(job).toMatchObject({ resolution: "4k", ratio: null, width: null, height: null, priceMicroUsd: 60_000 })
  })
})

describe(`${T2I}: n`, () => {
  it.each([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])("n %d is accepted", (n) => {
    expect(Either.getOrThrow(t2i({ prompt: "p", n })).n).toBe(n)
  })

  it.each([0, 11, -1, 1.5, 100, "3", null, true])("n %j is refused", (n) => {
    expect(refusal(t2i({ prompt: "p", n }))).toBe(`input.n must be an integer between 1 and 10 for ${T2I}`)
  })

  it("image-to-image has the same bounds and names its own model", () => {
    expect(refusal(i2i({ prompt: "p", imageUrls: [image], n: 11 }))).toBe(`input.n must be an integer between 1 and 10 for ${I2I}`)
    expect(Either.getOrThrow(i2i({ prompt: "p", imageUrls: [image], n: 10 })).n).toBe(10)
  })
})

describe(`${T2I}: prompt`, () => {
  it("missing", () => {
    expect(refusal(t2i({}))).toBe(`input.prompt is required for ${T2I}`)
    expect(refusal(t2i({ ratio: "1:1" }))).toBe(`input.prompt is required for ${T2I}`)
    expect(refusal(i2i({ imageUrls: [image] }))).toBe(`input.prompt is required for ${I2I}`)
  })

  it.each(["", " ", "  \n\t "])("empty or blank %j", (prompt) => {
    expect(refusal(t2i({ prompt }))).toBe(`input.prompt must not be empty for ${T2I}`)
  })

  // Rows are wrapped: it.each spreads a row that is itself an array.
  it.each([[42], [null], [true], [["a"]], [{ text: "a" }]])("not a string: %j", (prompt) => {
    expect(refusal(t2i({ prompt }))).toBe(`input.prompt must be a string for ${T2I}`)
  })

  it("at most 10000 characters", () => {
    expect(refusal(t2i({ prompt: "x".repeat(10_001) }))).toBe(`input.prompt must be at most 10000 characters for ${T2I}`)
    expect(Either.getOrThrow(t2i({ prompt: "x".repeat(10_000) })).prompt).toHaveLength(10_000)
  })

  it("is passed to the job as given", () => {
    expect(Either.getOrThrow(t2i({ prompt: "  a fox  " })).prompt).toBe("  a fox  ")
  })
})

describe(`${T2I}: ratio and resolution`, () => {
  it.each(["7:5", "1:1 ", "16x9", "", 5, null])("unknown ratio %j", (ratio) => {
    expect(refusal(t2i({ prompt: "p", ratio }))).toBe(`input.ratio must be one of ${allRatios} for ${T2I}`)
  })

  it.each(["8k", "1K", "1024", "", 1, null])("unknown resolution %j", (resolution) => {
    expect(refusal(t2i({ prompt: "p", resolution }))).toBe(`input.resolution must be one of 1k, 2k, 4k for ${T2I}`)
  })
})

describe(`${T2I}: the input object`, () => {
  it("an unknown field is refused, naming the field", () => {
    expect(refusal(t2i({ prompt: "p", foo: 1 }))).toBe(`input.foo is not a supported field for ${T2I}`)
    expect(refusal(t2i({ prompt: "p", Ratio: "1:1" }))).toBe(`input.Ratio is not a supported field for ${T2I}`)
  })

  it("a field name that is not a plain name is quoted in the message", () => {
    expect(refusal(t2i({ prompt: "p", "": 1 }))).toBe(`input[""] is not a supported field for ${T2I}`)
    expect(refusal(t2i({ prompt: "p", "image urls": [image] }))).toBe(`input["image urls"] is not a supported field for ${T2I}`)
    expect(refusal(t2i({ prompt: "p", "a.b": 1 }))).toBe(`input["a.b"] is not a supported field for ${T2I}`)
    expect(refusal(t2i({ prompt: "p", "image-urls": [image] }))).toBe(`input.image-urls is not a supported field for ${T2I}`)
  })

  it("imageUrls is not a field of text-to-image", () => {
    expect(refusal(t2i({ prompt: "p", imageUrls: [image] }))).toBe(`input.imageUrls is not a supported field for ${T2I}`)
  })

  it.each([["text"], [1], [null], [[]], [[{ prompt: "p" }]]])("input %j that is not an object is refused", (input) => {
    expect(refusal(t2i(input))).toBe(`input must be an object for ${T2I}`)
  })
})

describe(`${I2I}: imageUrls`, () => {
  it("missing", () => {
    expect(refusal(i2i({ prompt: "p" }))).toBe(`input.imageUrls is required for ${I2I}`)
  })

  it.each([[[]], [[image, image]], [[image, image, image]]])("%j does not hold exactly one URL", (imageUrls) => {
    expect(refusal(i2i({ prompt: "p", imageUrls }))).toBe(`input.imageUrls must contain exactly 1 URL for ${I2I}`)
  })

  it.each(["http://images.example/in.jpg", "ftp://images.example/in.jpg", "/in.jpg", "not a url", "", 7, null])(
    "element %j is not an absolute https URL",
    (url) => {
      expect(refusal(i2i({ prompt: "p", imageUrls: [url] }))).toBe(
        `input.imageUrls[0] must be an absolute https URL for ${I2I}`
      )
    }
  )

  it.each([image, { 0: image }, 1, null])("%j is not an array", (imageUrls) => {
    expect(refusal(i2i({ prompt: "p", imageUrls }))).toBe(`input.imageUrls must be an array of URLs for ${I2I}`)
  })

  it("one https URL is accepted and carried into the job", () => {
    const job = Either.getOrThrow(i2i({ prompt: "p", imageUrls: [image] }))
    expect(job).toMatchObject({ model: "alpha-image-2", mode: "image-to-image", imageUrls: [image], resolution: "1k", n: 1 })
  })

  it("unknown fields are refused for image-to-image too", () => {
    expect(refusal(i2i({ prompt: "p", imageUrls: [image], image_urls: [image] }))).toBe(
      `input.image_urls is not a supported field for ${I2I}`
    )
  })
})

describe("price (spec section 8): n × unit price of the resolution, in micro-USD", () => {
  it.each([["1k", 20_000], ["2k", 40_000], ["4k", 60_000]] as const)("%s is %d per image", (resolution, unit) => {
    for (let n = 1; n <= 10; n++) {
      expect(Either.getOrThrow(t2i({ prompt: "p", resolution, n })).priceMicroUsd).toBe(unit * n)
      expect(Either.getOrThrow(i2i({ prompt: "p", resolution, n, imageUrls: [image] })).priceMicroUsd).toBe(unit * n)
    }
  })

  it("the ratio does not change the price", () => {
    expect(Either.getOrThrow(t2i({ prompt: "p", ratio: "16:9", resolution: "4k", n: 3 })).priceMicroUsd).toBe(180_000)
    expect(Either.getOrThrow(t2i({ prompt: "p", resolution: "4k", n: 3 })).priceMicroUsd).toBe(180_000)
  })
})

describe("catalog text claims only what the code does", () => {
  it("WebP input is said to be transcoded where it is: by MediaUpstream, which the standalone server runs (test/media-rules.test.ts)", () => {
    const text = JSON.stringify(ModelInfo.describe(AlphaImage2.imageToImage))
    expect(text).not.toMatch(/transcoded to JPEG automatically/)
    expect(text).toMatch(/WebP input is transcoded to JPEG \(by MediaUpstream, which the standalone server runs\)/)
  })
})
