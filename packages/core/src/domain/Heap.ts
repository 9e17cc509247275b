/**
 * A mutable binary min-heap under a given order: the engine's due times, the memory
 * store's work in flight, a virtual clock's sleepers. Adding and taking the first are
 * O(log n).
 */
export class Heap<A> {
  private readonly items: Array<A> = []

  /** `before(a, b)`: whether `a` comes before `b`. */
  constructor(private readonly before: (a: A, b: A) => boolean) {}

  get size(): number {
    return this.items.length
  }

  /** The least entry, if any. */
  peek(): A | undefined {
    return this.items[0]
  }

  push(entry: A): void {
    const items = this.items
    // Moves the parents down into the hole until the entry's place is found: no swaps.
    let i = items.length
    items.push(entry)
    while (i > 0) {
      const parent = (i - 1) >> 1
      const above = items[parent]!
      if (!this.before(entry, above)) break
      items[i] = above
      i = parent
    }
    items[i] = entry
  }

  clear(): void {
    this.items.length = 0
  }

  /** Takes the least entry, if any. */
  pop(): A | undefined {
    const items = this.items
    const top = items[0]
    const last = items.pop()
    const size = items.length
    if (size === 0 || last === undefined) return top
    // Moves the lesser child up into the hole until `last` fits there.
    let i = 0
    for (;;) {
      const left = 2 * i + 1
      if (left >= size) break
      const right = left + 1
      const child = right < size && this.before(items[right]!, items[left]!) ? right : left
      if (!this.before(items[child]!, last)) break
      items[i] = items[child]!
      i = child
    }
    items[i] = last
    return top
  }
}
