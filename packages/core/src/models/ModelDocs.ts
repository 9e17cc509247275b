/**
 * docs/models.md, rendered from the catalog so the docs cannot drift from the code.
 * `npm run docs:models` writes it; a test fails when the file is stale.
 */
import { describe as describeModel } from "./ModelInfo.js"
import type { ModelSpec } from "./ModelSpec.js"
import { defaultPrices } from "./Pricing.js"

const cell = (value: unknown) => (typeof value === "string" ? value : JSON.stringify(value)).replace(/\|/g, "\\|")

/** `, each at most 2048 characters` for an array whose items have a maxLength. */
const urlLength = (property: Record<string, unknown>) => {
  const maxLength = (property["items"] as Record<string, unknown> | undefined)?.["maxLength"]
  return maxLength === undefined ? "" : `, each at most ${maxLength} characters`
}

const fieldRows = (schema: Record<string, unknown>) => {
  const properties = (schema["properties"] ?? {}) as Record<string, Record<string, unknown>>
  const required = new Set((schema["required"] ?? []) as ReadonlyArray<string>)
  return Object.entries(properties).map(([name, property]) => {
    const type = property["enum"]
      ? `one of ${(property["enum"] as ReadonlyArray<unknown>).join(", ")}`
      : property["type"] === "array"
      ? `array of URLs${property["minItems"] !== undefined ? ` (${property["minItems"]} to ${property["maxItems"]})` : ""}${urlLength(property)}`
      : property["minimum"] !== undefined
      ? `${property["type"]} ${property["minimum"]} to ${property["maximum"]}`
      : String(property["type"] ?? "")
    return `| ${name} | ${required.has(name) ? "yes" : "no"} | ${cell(type)} | ${cell(property["description"] ?? "")} |`
  })
}

/** What of a priced input bears on its price: `720p, 5 s, 2 images, mode i2v`. */
const pricedInput = (input: Readonly<Record<string, unknown>>): string => {
  const parts: Array<string> = []
  if (input["resolution"] !== undefined) parts.push(String(input["resolution"]))
  if (input["duration"] !== undefined) parts.push(`${input["duration"]} s`)
  if (input["n"] !== undefined) parts.push(`n ${input["n"]}`)
  const media = ["imageUrls", "images", "mediaUrls"].map((field) => input[field]).find(Array.isArray)
  if (media !== undefined) parts.push(`${media.length} media URL${media.length === 1 ? "" : "s"}`)
  if (input["mode"] !== undefined) parts.push(`mode ${input["mode"]}`)
  return parts.length === 0 ? "the example as shown, defaults" : parts.join(", ")
}

/** The whole document. */
export const render = (models: ReadonlyArray<ModelSpec>): string => {
  const sections = models.map((spec) => {
    const info = describeModel(spec)
    return [
      `## ${info.id}`,
      "",
      `Family ${info.family} · output ${info.output} · modes ${info.modes.join(", ")} · timeout after ${info.deadlineSeconds / 60} min${info.passThrough ? " · unknown fields pass through to the upstream" : ""}`,
      "",
      "| field | required | values | notes |",
      "|---|---|---|---|",
      ...fieldRows(info.inputSchema),
      "",
      `Defaults: ${Object.entries(info.defaults).map(([key, value]) => `${key} ${cell(value)}`).join("; ")}.`,
      "",
      ...info.limits.map((limit) => `- ${limit}`),
      `- Price: ${info.priceRule}.`,
      `- ${info.priceSource === "spec" ? "Prices (the spec's)" : "Prices (the operator's price table; these are its defaults, configurable)"}: ${
        info.prices.map((priced) => `${pricedInput(priced.input)} ${priced.usd} USD`).join("; ")
      }.`,
      "",
      "Example:",
      "",
      "```json",
      JSON.stringify({ model: info.id, input: info.examples[0]!.input }),
      "```",
      ""
    ].join("\n")
  })
  return [
    "# Models",
    "",
    "Generated from the catalog in `packages/core/src/models` by `npm run docs:models`; do not edit by hand.",
    "`GET /api/v1/models` returns the same information, with the full JSON Schema of each input.",
    "",
    `${models.length} models. Prices not published by the spec come from the price table`,
    "(`Pricing.defaultPrices`, replaceable by the host through the `Prices` reference).",
    "",
    ...sections,
    "## Default price table",
    "",
    "Integer micro-USD (1 USD = 1,000,000). A host replaces it by providing its own `Pricing.Prices`.",
    "",
    "| model | unit | price |",
    "|---|---|---|",
    ...Object.entries(defaultPrices.clip3PerSecond).flatMap(([model, byResolution]) =>
      Object.entries(byResolution).map(([resolution, price]) => `| ${model} | per second at ${resolution} | ${price} |`)
    ),
    ...Object.entries(defaultPrices.videoPerSecond).map(([model, price]) => `| ${model} | per second | ${price} |`),
    ...Object.entries(defaultPrices.imagePerImage).map(([model, byResolution]) =>
      `| ${model} | per image at 1k / 2k / 4k | ${Object.values(byResolution).join(" / ")} |`
    ),
    ""
  ].join("\n")
}
