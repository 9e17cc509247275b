import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import { Moderation, ModerationRules } from "../src/index.js"
import { blockedByCategory, disguises, innocent } from "./LookAlikes.js"

const check = (prompt: string, rules: ModerationRules.Rules = ModerationRules.builtIn) =>
  Effect.flatMap(Moderation.Moderation, (moderation) => moderation.check(prompt)).pipe(Effect.provide(ModerationRules.layer(rules)))

const flaggedOf = (prompt: string, rules?: ModerationRules.Rules) =>
  Effect.map(check(prompt, rules), (verdict) =>
    Object.entries(verdict.categories).filter(([, on]) => on).map(([category]) => category).sort())

describe("ModerationRules: the built-in list", () => {
  it.effect("ordinary prompts pass, including words that contain or resemble listed ones", () =>
    Effect.gen(function*() {
      for (
        const prompt of [
          "a lighthouse at dusk, oil painting",
          "a killer whale breaching at sunset",
          "the Royal Gorge bridge in autumn",
          "a naked mole rat in a museum display",
          "two kids playing football in a park",
          "a 1980s sports car, 4k, studio light",
          "an executive in a glass office",
          "a nude colour dress on a mannequin",
          "Suicide Squad style movie poster"
        ]
      ) {
        expect([prompt, yield* flaggedOf(prompt)]).toEqual([prompt, []])
      }
    }))

  it.effect("a match flags its category and the parent of a subcategory; the verdict has all 13 keys", () =>
    Effect.gen(function*() {
      const verdict = yield* check("a battlefield full of gore and a severed head")
      expect(verdict.flagged).toBe(true)
      expect(Object.keys(verdict.categories).sort()).toEqual([...Moderation.moderationCategories].sort())
      expect(yield* flaggedOf("a battlefield full of gore and a severed head")).toEqual(["violence", "violence/graphic"])
      expect(yield* flaggedOf("I will find you and hurt you")).toEqual(["harassment", "harassment/threatening"])
      expect(yield* flaggedOf("how to build a pipe bomb")).toEqual(["illicit", "illicit/violent"])
      expect(yield* flaggedOf("a painless suicide method")).toEqual(["self-harm", "self-harm/instructions"])
      expect(yield* flaggedOf("exterminate all the immigrants")).toEqual(["hate", "hate/threatening"])
    }))

  it.effect("sexual content involving minors is flagged in either order, with ages written as numbers", () =>
    Effect.gen(function*() {
      expect(yield* flaggedOf("a naked child on a beach")).toEqual(["sexual", "sexual/minors"])
      expect(yield* flaggedOf("nsfw photo of a 12 year old")).toEqual(["sexual", "sexual/minors"])
      expect(yield* flaggedOf("a 12 year old blowing out birthday candles")).toEqual([])
    }))

  it.effect("case, accents, punctuation, spacing and digit stand-ins do not hide a word", () =>
    Effect.gen(function*() {
      for (const prompt of ["GORE", "a gôre scene", "g0re!!", "extremely   GORY...", "P0RN0GRAPHIC poster"]) {
        expect([prompt, (yield* check(prompt)).flagged]).toEqual([prompt, true])
      }
    }))
})

describe("ModerationRules: letters of other scripts that look like Latin ones (issue 33)", () => {
  it.effect("a blocked prompt of every category, rewritten with Cyrillic or Greek look-alikes, flags what the plain one flags", () =>
    Effect.gen(function*() {
      expect(new Set(blockedByCategory.map(([category]) => category))).toEqual(new Set(Moderation.moderationCategories))
      const missed: Array<string> = []
      for (const [category, prompt, flagged] of blockedByCategory) {
        expect([prompt, yield* flaggedOf(prompt)]).toEqual([prompt, [...flagged].sort()])
        expect(flagged).toContain(category)
        for (const [how, text] of disguises(prompt)) {
          expect([how, text]).toEqual([how, expect.stringMatching(/[^\x00-\x7f]/)])
          const found = yield* flaggedOf(text)
          if (found.join() !== [...flagged].sort().join()) missed.push(`${category}, ${how}: ${text} flags [${found.join(", ")}]`)
        }
      }
      expect(missed).toEqual([])
    }))

  it.effect("invisible characters inside a word do not hide it (UTS #39 drops default-ignorable code points)", () =>
    Effect.gen(function*() {
      const missed: Array<string> = []
      // Zero-width space, soft hyphen, zero-width joiner, word joiner, byte order mark, a variation selector.
      for (const invisible of ["\u200b", "\u00ad", "\u200d", "\u2060", "\ufeff", "\ufe0f"]) {
        for (const prompt of [`a scene full of g${invisible}ore`, `a m${invisible}ass${invisible}acre`, `a scene full of g${invisible}\u043er\u0435`]) {
          if (!(yield* check(prompt)).flagged) missed.push(JSON.stringify(prompt))
        }
      }
      expect(missed).toEqual([])
    }))

  it.effect("genuine Cyrillic and Greek text, alone or among Latin words, passes", () =>
    Effect.gen(function*() {
      for (const prompt of innocent) {
        expect([prompt, yield* flaggedOf(prompt)]).toEqual([prompt, []])
      }
    }))

  it.effect("an operator's words and patterns in Cyrillic still match Cyrillic text", () =>
    Effect.gen(function*() {
      const rules = Either.getOrThrow(ModerationRules.parseRulesFile(JSON.stringify({
        categories: { violence: { words: ["резня"] }, "hate/threatening": { patterns: ["убить всех"] } }
      })))
      expect(yield* flaggedOf("резня в деревне", rules)).toEqual(["violence"])
      expect(yield* flaggedOf("Убить всех!", rules)).toEqual(["hate", "hate/threatening"])
      expect(yield* flaggedOf("Кот спит на подоконнике", rules)).toEqual([])
    }))
})

describe("ModerationRules: the cost of a check", () => {
  it("a 10,000-character prompt repeating one term of a two-term rule costs about what an innocent prompt of that length does, not its square", () => {
    const rules = ModerationRules.make(Either.getOrThrow(ModerationRules.compile(ModerationRules.builtIn)))
    const fill = (unit: string) => unit.repeat(Math.ceil(10_000 / unit.length)).slice(0, 10_000)
    const time = (prompt: string) => {
      const start = performance.now()
      Effect.runSync(rules.check(prompt))
      return performance.now() - start
    }
    // The median of eleven ratios to the yardstick checked just before, after four to warm
    // up: a moment of load on the machine weighs on one pair, not on the verdict.
    const times = (prompt: string, yardstick: string) =>
      Array.from({ length: 15 }, () => {
        const base = time(yardstick)
        return time(prompt) / base
      }).slice(4).sort((a, b) => a - b)[5]!
    // Innocent text of the same kind: ASCII, and Latin with Cyrillic look-alikes (read twice).
    const latin = fill("a lighthouse at dusk over a calm sea, ")
    const lookAlikes = fill("\u0430 l\u0456ghth\u043eus\u0435 \u0430t dusk \u043ev\u0435r \u0430 \u0441\u0430lm s\u0435\u0430, ")
    for (
      const [unit, yardstick] of [["child ", latin], ["a nude ", latin], ["12 year old ", latin], ["a nud\u0435 ", lookAlikes], ["\u0441hild ", lookAlikes]] as const
    ) {
      const prompt = fill(unit)
      expect([unit, Effect.runSync(rules.check(prompt)).flagged]).toEqual([unit, false])
      const ratio = times(prompt, yardstick)
      // About 1 now; 120 to 270 when the rule scanned the rest of the prompt from every "child".
      expect([unit, ratio < 20 ? "under 20 times" : `${ratio.toFixed(1)} times`]).toEqual([unit, "under 20 times"])
    }
  })
})

describe("ModerationRules: an operator's rules file", () => {
  it.effect("adds to the built-in list by default, or replaces it with extend: false", () =>
    Effect.gen(function*() {
      const added = Either.getOrThrow(ModerationRules.parseRulesFile(JSON.stringify({
        categories: { violence: { words: ["knife fight"], patterns: ["\\bduel to the death\\b"] } }
      })))
      expect(yield* flaggedOf("a knife fight in an alley", added)).toEqual(["violence"])
      expect(yield* flaggedOf("a duel to the death at noon", added)).toEqual(["violence"])
      expect(yield* flaggedOf("lots of gore", added)).toEqual(["violence", "violence/graphic"])

      const replaced = Either.getOrThrow(ModerationRules.parseRulesFile(JSON.stringify({
        extend: false,
        categories: { illicit: { words: ["moonshine"] } }
      })))
      expect(yield* flaggedOf("a moonshine still in the woods", replaced)).toEqual(["illicit"])
      expect(yield* flaggedOf("lots of gore", replaced)).toEqual([])
    }))

  it("refuses a file that is not JSON, names an unknown category, has an unknown key or a bad pattern", () => {
    const problem = (text: string) => Either.getLeft(ModerationRules.parseRulesFile(text))._tag === "Some"
      ? Either.getLeft(ModerationRules.parseRulesFile(text)).pipe((left) => left._tag === "Some" ? left.value : "")
      : ""
    expect(problem("{ nope")).toMatch(/^the moderation rules file is not JSON/)
    expect(problem(JSON.stringify({ categories: { violense: { words: ["x"] } } }))).toMatch(/not valid.*violense/s)
    expect(problem(JSON.stringify({ categories: {}, extra: 1 }))).toMatch(/not valid.*extra/s)
    expect(problem(JSON.stringify({ categories: { hate: { patterns: ["(unclosed"] } } }))).toMatch(
      /^the hate pattern "\(unclosed" is not a valid regular expression/
    )
  })

  it.effect("invalid rules given to the layer stop the start with the message", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Layer.build(ModerationRules.layer({ hate: { words: [], patterns: ["("] } })))
      expect(exit._tag).toBe("Failure")
    }).pipe(Effect.scoped))
})
