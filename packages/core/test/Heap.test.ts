import { describe, expect, it } from "@effect/vitest"
import { Heap } from "../src/index.js"

/** A small deterministic generator, so a failure repeats. */
const numbers = (seed: number) => () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648

describe("Heap", () => {
  it("gives its entries back in order, with pushes and pops interleaved, duplicates included", () => {
    const next = numbers(7)
    for (let round = 0; round < 50; round++) {
      const heap = new Heap<number>((a, b) => a < b)
      const held: Array<number> = []
      const taken: Array<number> = []
      for (let i = 0; i < 400; i++) {
        if (next() < 0.6 || held.length === 0) {
          const value = Math.floor(next() * 50)
          heap.push(value)
          held.push(value)
        } else {
          held.sort((a, b) => a - b)
          const least = heap.pop()
          expect(least).toBe(held.shift())
          taken.push(least!)
        }
        expect(heap.size).toBe(held.length)
        expect(heap.peek()).toBe(held.length === 0 ? undefined : Math.min(...held))
      }
      const rest: Array<number> = []
      while (heap.size > 0) rest.push(heap.pop()!)
      expect(rest).toEqual(held.sort((a, b) => a - b))
    }
  })

  it("an empty heap gives nothing; clear empties it", () => {
    const heap = new Heap<string>((a, b) => a < b)
    expect([heap.pop(), heap.peek(), heap.size]).toEqual([undefined, undefined, 0])
    heap.push("b")
    heap.push("a")
    heap.clear()
    expect(heap.pop()).toBeUndefined()
  })
})
