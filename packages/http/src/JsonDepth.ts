/**
 * How deeply a JSON text nests, found by a scan over its characters before `JSON.parse`:
 * a small body nested thousands of levels deep parses, but every recursive walk after it
 * (Schema decoding, the idempotency fingerprint, `JSON.stringify`) overflows the stack.
 */

/** Deepest nesting of arrays and objects a request body may have. */
export const maxDepth = 64

/**
 * Whether `text` opens more than `max` arrays or objects inside one another. Brackets inside
 * strings do not count; the text need not be valid JSON (the parser judges that after).
 */
export const exceeds = (text: string, max: number = maxDepth): boolean => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++ // a backslash escapes the next character, a quote included
      else if (c === 0x22) inString = false
    } else if (c === 0x22) {
      inString = true
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true
    } else if (c === 0x5d || c === 0x7d) {
      depth--
    }
  }
  return false
}
