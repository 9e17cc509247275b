/**
 * The routes file: a valid one gives routes whose templates make each provider's input; a
 * wrong one fails with every problem, each naming its line.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Testing from "@mediagate/core/testing"
import { RoutesFile } from "@mediagate/upstream"
import { Either } from "effect"

const options = { providers: new Set(["fal", "replicate", "openai", "relay"]), models: new Set(["alpha-image-2", "beta-imagine", "motion-2.0"]) }
const parse = (text: string) => RoutesFile.parse(text, "routes.json", options)
const problems = (text: string) => {
  const parsed = parse(text)
  if (Either.isRight(parsed)) throw new Error("expected problems")
  return parsed.left.message.split("\n")
}

describe("routes file", () => {
  it("a valid file: templates fill in the job's values, nulls are left out, defaults per provider", () => {
    const parsed = parse(`{
  "routes": [
    { "model": "alpha-image-2",
      "targets": [
        { "provider": "fal", "model": "fal-ai/flux/dev",
          "input": { "prompt": "$prompt", "num_images": "$n", "image_size": { "width": "$width", "height": "$height" }, "seed": "$params.seed", "note": "$$literal", "safety": false } },
        { "provider": "openai", "model": "gpt-image-1" }
      ] },
    { "model": "beta-imagine", "targets": [{ "provider": "relay", "model": "beta-imagine" }] }
  ]
}`)
    expect(Either.isRight(parsed)).toBe(true)
    if (Either.isLeft(parsed)) return
    const [image, relay] = parsed.right
    const job = Testing.job({ prompt: "a fox", n: 2, width: 1024, height: null, ratio: "1:1" })
    const sizeless = Testing.job({ prompt: "a fox", n: 1, width: null, height: null })
    expect(image!.targets[0]!.input(sizeless, {})).toEqual({ prompt: "a fox", num_images: 1, note: "$literal", safety: false })
    const request = { model: "alpha-image-2/text-to-image", prompt: "a fox", n: 2 }
    expect(image!.targets[0]!.input(job, request)).toEqual({ prompt: "a fox", num_images: 2, image_size: { width: 1024 }, note: "$literal", safety: false })
    expect(image!.targets[1]!.input(job, request)).toEqual({ model: "gpt-image-1", prompt: "a fox", n: 2, size: "1024x1024" })
    expect(relay!.targets[0]!.input(job, request)).toEqual(request)
  })

  it("a syntax error names its line", () => {
    expect(problems(`{\n  "routes": [\n    { "model": "alpha-image-2" \n      "targets": [] }\n  ]\n}`)[0]).toMatch(/^routes\.json:4: /)
  })

  it("every wrong entry is reported with its line", () => {
    const found = problems(`{
  "routes": [
    { "model": "alpha-image-2",
      "targets": [
        { "provider": "fal", "model": "fal-ai/flux/dev" },
        { "provider": "midjourney", "model": "v6", "input": {} },
        { "provider": "replicate", "model": "o/m", "input": { "prompt": "$promt" } }
      ] },
    { "model": "gamma-9", "targets": [{ "provider": "openai", "model": "m" }] }
  ]
}`)
    expect(found).toEqual([
      `routes.json:5: routes.0.targets.0: a fal target needs an "input" template: every model there takes its own input`,
      `routes.json:6: routes.0.targets.1.provider: provider "midjourney" is not configured (configured: fal, replicate, openai, relay; see docs/providers.md)`,
      expect.stringMatching(/^routes\.json:7: routes\.0\.targets\.2\.input\.prompt: unknown variable \$promt; use one of \$prompt, /),
      "routes.json:9: routes.1.model: no model of the catalog is named gamma-9"
    ])
  })

  it("schema errors (a missing field, an empty target list, an unknown key) name their lines", () => {
    const found = problems(`{
  "routes": [
    { "model": "alpha-image-2", "targets": [] },
    { "model": "beta-imagine", "targets": [{ "provider": "relay" }] },
    { "model": "motion-2.0", "targets": [{ "provider": "relay", "model": "m", "key": "secret" }] }
  ]
}`)
    expect(found).toContain("routes.json:3: routes.0.targets: needs at least one target")
    expect(found.some((line) => line.startsWith("routes.json:4: routes.1.targets.0.model"))).toBe(true)
    expect(found.some((line) => line.startsWith("routes.json:5: routes.2.targets.0.key"))).toBe(true)
  })
  it("a target may set maxRunning, a whole number from 1; a wrong one, or two limits for one target, names the route, the target and the line", () => {
    const parsed = parse(`{
  "routes": [
    { "model": "alpha-image-2",
      "targets": [
        { "provider": "openai", "model": "gpt-image-1", "maxRunning": 4 },
        { "provider": "openai", "model": "dall-e-3" }
      ] }
  ]
}`)
    expect(Either.isRight(parsed) && parsed.right[0]!.targets.map((target) => target.maxRunning)).toEqual([4, undefined])
    expect(problems(`{
  "routes": [
    { "model": "alpha-image-2",
      "targets": [
        { "provider": "openai", "model": "gpt-image-1", "maxRunning": 0 },
        { "provider": "openai", "model": "dall-e-3", "maxRunning": 2.5 }
      ] },
    { "model": "beta-imagine",
      "targets": [{ "provider": "openai", "model": "gpt-image-1", "maxRunning": "4" }] },
    { "model": "motion-2.0",
      "targets": [{ "provider": "openai", "model": "dall-e-3", "maxRunning": 3 }] }
  ]
}`)).toEqual([
      "routes.json:5: routes.0.targets.0.maxRunning: target openai:gpt-image-1 of the route of alpha-image-2: maxRunning must be a whole number from 1 to 1000000 (got 0)",
      "routes.json:6: routes.0.targets.1.maxRunning: target openai:dall-e-3 of the route of alpha-image-2: maxRunning must be a whole number from 1 to 1000000 (got 2.5)",
      `routes.json:9: routes.1.targets.0.maxRunning: target openai:gpt-image-1 of the route of beta-imagine: maxRunning must be a whole number from 1 to 1000000 (got "4")`
    ])
    expect(problems(`{
  "routes": [
    { "model": "alpha-image-2", "targets": [{ "provider": "openai", "model": "gpt-image-1", "maxRunning": 4 }] },
    { "model": "beta-imagine", "targets": [{ "provider": "openai", "model": "gpt-image-1", "maxRunning": 2 }] }
  ]
}`)).toEqual([
      "routes.json:4: routes.1.targets.0.maxRunning: target openai:gpt-image-1 of the route of beta-imagine has maxRunning 2, but 4 in the route of alpha-image-2; a target has one limit"
    ])
  })
})
