/**
 * Moderation by local rules, the default moderator: for each of the spec's 13 categories a
 * list of words and phrases and a list of regular expressions, matched against the prompt.
 *
 * The prompt is normalised first (Unicode NFKC, lower case, accents and invisible characters
 * such as the zero-width space removed, common digit and symbol stand-ins for letters read as
 * letters: `k1ll` is `kill`), and every run of other characters becomes one space, so
 * `Gore!!`, `g o r e` aside, matches the word `gore`.
 * Words and phrases match whole words; patterns are JavaScript regular expressions on the
 * normalised text (case-insensitive, Unicode).
 * A prompt with characters outside ASCII is also read with letters of other scripts taken
 * for the Latin ones they look like, by Unicode's confusables data (UTS #39, through the
 * `unhomoglyph` package): Cyrillic `gоrе` and Greek `gοre` match `gore`. Words and patterns
 * are matched in both readings, so rules written in Cyrillic still match Cyrillic text.
 * A match in a subcategory also flags its parent (`violence/graphic` flags `violence`), as
 * moderation APIs answer.
 *
 * The built-in list is deliberately short and unambiguous: it catches plain requests for
 * what the categories name, not every way of asking, and it holds no slurs. An operator
 * adds to it, or replaces it, with a rules file (`parseRulesFile`).
 */
import { Context, Effect, Either, Layer, ParseResult, Schema } from "effect"
import unhomoglyph from "unhomoglyph"
import { Moderation, type ModerationCategory, moderationCategories, verdict } from "./Moderation.js"

/** The words, phrases and patterns of one category. */
export interface CategoryRules {
  readonly words: ReadonlyArray<string>
  readonly patterns: ReadonlyArray<string>
}

export type Rules = Readonly<Partial<Record<ModerationCategory, CategoryRules>>>

/** Each subcategory's parent, flagged with it. */
const parents: Readonly<Partial<Record<ModerationCategory, ModerationCategory>>> = {
  "harassment/threatening": "harassment",
  "hate/threatening": "hate",
  "illicit/violent": "illicit",
  "self-harm/intent": "self-harm",
  "self-harm/instructions": "self-harm",
  "sexual/minors": "sexual",
  "violence/graphic": "violence"
}

const minors = "(?:child|children|kid|kids|minor|minors|underage|preteen|pre teen|toddler|schoolgirl|schoolboy|little girl|little boy|young girl|young boy|\\d+\\s?(?:year|yr)s?\\s?old)"
const sexualTerms = "(?:nude|naked|nudity|sex|sexual|sexy|porn|erotic|nsfw|lingerie|undressed|topless)"
const groups =
  "(?:jews|muslims|christians|hindus|sikhs|black people|blacks|white people|whites|asians|arabs|mexicans|immigrants|refugees|gays|lesbians|trans people|women|men)"

/** The built-in rules. */
export const builtIn: Rules = {
  harassment: {
    words: ["humiliate her", "humiliate him", "humiliate them", "cyberbully", "cyberbullying"],
    patterns: ["\\byou(?: are|re) (?:worthless|pathetic|disgusting|a waste of space)\\b", "\\bnobody (?:likes|loves|wants) you\\b"]
  },
  "harassment/threatening": {
    words: ["i will kill you", "i am going to kill you", "im going to kill you", "you will die", "watch your back"],
    patterns: ["\\bi (?:will|am going to|m going to|ll) (?:hurt|find|get|kill|beat|stab|shoot) you\\b"]
  },
  sexual: {
    words: ["porn", "porno", "pornographic", "pornography", "hardcore sex", "sex scene", "explicit sex", "xxx", "hentai", "nsfw", "genitals", "orgasm"],
    patterns: ["\\b(?:fully |completely )?(?:nude|naked) (?:woman|women|man|men|girl|boy|person|people|body|photo)\\b"]
  },
  hate: {
    words: ["heil hitler", "white power", "white supremacy", "master race", "ethnic cleansing", "nazi propaganda", "racial purity"],
    patterns: [`\\b${groups} are (?:vermin|subhuman|animals|parasites|a disease)\\b`]
  },
  "hate/threatening": {
    words: [],
    patterns: [`\\b(?:kill|exterminate|gas|eradicate|eliminate|burn|lynch|hang) (?:all )?(?:the )?${groups}\\b`]
  },
  illicit: {
    words: ["counterfeit money", "counterfeit bills", "fake passport", "forged passport", "fake id card", "cook meth", "how to make meth", "buy cocaine", "sell drugs", "drug dealing", "credit card fraud"],
    patterns: ["\\bhow to (?:steal|shoplift|launder money|hack into)\\b"]
  },
  "illicit/violent": {
    words: ["pipe bomb", "make a bomb", "build a bomb", "homemade explosive", "homemade explosives", "molotov cocktail", "ghost gun", "how to make a gun"],
    patterns: ["\\bhow to (?:make|build) (?:an? )?(?:explosive|bomb|grenade|napalm)\\b"]
  },
  "self-harm/intent": {
    words: ["i want to die", "i want to kill myself", "i am going to kill myself", "im going to kill myself", "kill myself", "end my life"],
    patterns: []
  },
  "self-harm/instructions": {
    words: ["how to kill yourself", "how to kill myself", "how to commit suicide", "ways to kill myself", "painless suicide", "suicide method", "suicide methods"],
    patterns: []
  },
  "self-harm": {
    words: ["self harm", "selfharm", "cutting myself", "cut myself", "commit suicide", "suicide note", "suicidal", "slit my wrists", "slit wrists"],
    patterns: []
  },
  "sexual/minors": {
    words: ["child porn", "child pornography", "loli", "lolicon", "shotacon", "csam"],
    // Both anywhere, each looked for once from the start: `minor.*sexual` and `sexual.*minor`
    // tried from every occurrence of the first term, which cost the square of the prompt's length.
    patterns: [`^(?=.*\\b${minors}\\b)(?=.*\\b${sexualTerms}\\b)`]
  },
  violence: {
    words: ["murder", "murdering", "massacre", "slaughtering people", "torture", "torturing", "lynching", "mass shooting", "school shooting", "stabbing", "beheading", "behead", "execution video"],
    patterns: ["\\b(?:shoot|shooting|stab|stabbing|beat|beating) (?:a |the )?(?:man|woman|child|person|people|crowd)\\b"]
  },
  "violence/graphic": {
    words: ["gore", "gory", "dismembered", "dismemberment", "disembowel", "disemboweled", "decapitated", "decapitation", "mutilated", "mutilation", "entrails", "severed head", "graphic violence", "bloody corpse"],
    patterns: []
  }
}

/** Digits and symbols read as the letters they stand in for. */
const standIns: Readonly<Record<string, string>> = { "0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s" }

/** The words of a text: stand-ins replaced inside words, every run of other characters one space, a space at each end. */
const wordsOf = (text: string): string => {
  // A stand-in counts only next to a letter (`k1ll`), so `2 kids` and `1980` stay numbers.
  const read = text.replace(/[013457@$]/g, (char, at: number) =>
    /\p{L}/u.test(text[at - 1] ?? "") || /\p{L}/u.test(text[at + 1] ?? "") ? standIns[char]! : char)
  return ` ${read.replace(/[^\p{L}\p{N}]+/gu, " ").trim()} `
}

/**
 * Accents and other combining marks removed, and the characters that show nothing (zero-width
 * space and joiners, soft hyphen, word joiner: Unicode's default-ignorable code points, which
 * UTS #39 drops too), so `g\u200Bore` is `gore`.
 */
const withoutMarks = (text: string): string => text.normalize("NFD").replace(/[\p{M}\p{Default_Ignorable_Code_Point}]+/gu, "")

/**
 * The text the rules read: NFKC, lower case, accents and invisible characters removed,
 * stand-ins replaced inside words, every run of other characters one space, with a space at
 * each end.
 */
export const normalize = (prompt: string): string => wordsOf(withoutMarks(prompt.normalize("NFKC").toLowerCase()))

/**
 * The ASCII letters by their skeleton in Unicode's confusables data (UTS #39), upper and
 * lower case apart: `I` and `l` share the skeleton `l`, `m` has `rn`.
 */
const latinBySkeleton = new Map<string, { upper?: string; lower?: string }>()
for (const letter of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") {
  const skeleton = unhomoglyph(letter)
  const known = latinBySkeleton.get(skeleton) ?? {}
  latinBySkeleton.set(skeleton, letter === letter.toLowerCase() ? { ...known, lower: letter } : { ...known, upper: letter })
}

/** What each character outside ASCII has been read as, kept for the characters seen last. */
const readAs = new Map<string, string>()

/**
 * A character outside ASCII as what it looks like, in lower case, by the confusables data:
 * its skeleton, and when an ASCII letter has the same skeleton, that letter of the
 * character's own case (Greek `Ι`, whose skeleton is `l` as `I`'s is, reads `i`; Cyrillic
 * `В` reads `b`). An upper-case letter the data does not map reads as its lower case does.
 */
const lookAlike = (char: string): string => {
  const known = readAs.get(char)
  if (known !== undefined) return known
  const skeleton = unhomoglyph(char)
  const lower = char.toLowerCase()
  const latin = latinBySkeleton.get(skeleton)
  const read = skeleton === char && lower !== char
    ? lookAlike(lower)
    : latin === undefined
    ? skeleton.toLowerCase()
    : (char === lower ? latin.lower ?? latin.upper! : latin.upper ?? latin.lower!).toLowerCase()
  if (readAs.size >= 4096) readAs.clear()
  readAs.set(char, read)
  return read
}

/**
 * Letters of other scripts read as the ones they look like (UTS #39 confusables), in lower
 * case: Cyrillic `gоrе` is `gore`. Only characters outside ASCII are read so: ASCII is what
 * the rules are written in, and the data's own ASCII look-alikes (`m` as `rn`, `I` as `l`)
 * would make innocent words collide.
 */
export const fold = (text: string): string =>
  text.replace(/[^\x00-\x7f]+/g, (run) => {
    let read = ""
    for (const char of run) read += lookAlike(char)
    return read
  })

/** The prompt as the rules read it, and, when it has characters outside ASCII, with look-alikes folded too. */
export interface Texts {
  readonly plain: string
  readonly folded: string
}

/** The texts the rules read in a prompt: `normalize`'s, and the same after `fold`. */
export const textsOf = (prompt: string): Texts => {
  const plain = normalize(prompt)
  if (!/[^\x00-\x7f]/.test(plain)) return { plain, folded: plain }
  return { plain, folded: wordsOf(withoutMarks(fold(prompt.normalize("NFKC").normalize("NFD")).toLowerCase())) }
}

interface Compiled {
  readonly category: ModerationCategory
  readonly test: (texts: Texts) => boolean
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** One expression tested on the plain text and, when it differs, on the folded one. */
const onBoth = (plain: RegExp, folded: RegExp = plain) => (texts: Texts): boolean =>
  plain.test(texts.plain) || (texts.folded !== texts.plain && folded.test(texts.folded))

/**
 * The rules as tests on normalised text; a pattern that is not a valid expression is a Left
 * naming it. Words are matched in the plain text and, folded as the prompt is, in the folded
 * one; patterns, which may be written in any script, in both texts.
 */
export const compile = (rules: Rules): Either.Either<ReadonlyArray<Compiled>, string> => {
  const compiled: Array<Compiled> = []
  for (const category of moderationCategories) {
    const entry = rules[category]
    if (entry === undefined) continue
    const phrases = entry.words.map((word) => textsOf(word)).filter((word) => word.plain.trim().length > 0)
    if (phrases.length > 0) {
      const wordsIn = (text: "plain" | "folded") => new RegExp(` (?:${phrases.map((word) => escape(word[text].trim())).join("|")}) `, "u")
      compiled.push({ category, test: onBoth(wordsIn("plain"), wordsIn("folded")) })
    }
    for (const pattern of entry.patterns) {
      try {
        compiled.push({ category, test: onBoth(new RegExp(pattern, "iu")) })
      } catch (error) {
        return Either.left(`the ${category} pattern ${JSON.stringify(pattern)} is not a valid regular expression: ${(error as Error).message}`)
      }
    }
  }
  return Either.right(compiled)
}

/** A moderator of compiled rules. */
export const make = (compiled: ReadonlyArray<Compiled>): Context.Tag.Service<Moderation> => ({
  check: (prompt) =>
    Effect.sync(() => {
      const texts = textsOf(prompt)
      const flagged = new Set<ModerationCategory>()
      for (const rule of compiled) {
        if (flagged.has(rule.category) || !rule.test(texts)) continue
        flagged.add(rule.category)
        const parent = parents[rule.category]
        if (parent !== undefined) flagged.add(parent)
      }
      return verdict([...flagged])
    })
})

/** The local rules as the Moderation; invalid rules stop the start with their message. */
export const layer = (rules: Rules = builtIn): Layer.Layer<Moderation> =>
  Layer.effect(Moderation, Either.match(compile(rules), { onLeft: Effect.dieMessage, onRight: (compiled) => Effect.succeed(make(compiled)) }))

const CategoryEntry = Schema.Struct({
  words: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  patterns: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] })
})

/**
 * An operator's rules file (JSON):
 *
 * ```json
 * { "extend": true,
 *   "categories": { "violence": { "words": ["knife fight"], "patterns": ["\\bduel to the death\\b"] } } }
 * ```
 *
 * With `extend` (the default) the file's words and patterns are added to the built-in
 * rules; with `"extend": false` they replace them (a category the file leaves out then has
 * no rules). Category names are the spec's 13.
 */
const RulesFile = Schema.Struct({
  extend: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  categories: Schema.Struct(
    Object.fromEntries(moderationCategories.map((category) => [category, Schema.optional(CategoryEntry)])) as Record<
      ModerationCategory,
      Schema.optional<typeof CategoryEntry>
    >
  )
})

/** The rules of a rules file's text, checked (categories, patterns), or what is wrong with it. */
export const parseRulesFile = (text: string): Either.Either<Rules, string> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    return Either.left(`the moderation rules file is not JSON: ${(error as Error).message}`)
  }
  return Schema.decodeUnknownEither(RulesFile)(json, { onExcessProperty: "error" }).pipe(
    Either.mapLeft((error): string => `the moderation rules file is not valid: ${ParseResult.TreeFormatter.formatErrorSync(error)}`),
    Either.flatMap((file): Either.Either<Rules, string> => {
      const rules: Partial<Record<ModerationCategory, CategoryRules>> = file.extend ? { ...builtIn } : {}
      for (const [category, entry] of Object.entries(file.categories) as Array<[ModerationCategory, CategoryRules | undefined]>) {
        if (entry === undefined) continue
        const base = rules[category]
        rules[category] = base === undefined
          ? entry
          : { words: [...base.words, ...entry.words], patterns: [...base.patterns, ...entry.patterns] }
      }
      return Either.map(compile(rules), (): Rules => rules)
    })
  )
}
