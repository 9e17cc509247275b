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
    items.push(entry)
    for (let i = items.length - 1; i > 0;) {
      const parent = (i - 1) >> 1
      if (!this.before(items[i]!, items[parent]!)) break
      ;[items[i], items[parent]] = [items[parent]!, items[i]!]
      i = parent
    }
  }

  clear(): void {
    this.items.length = 0
  }

  /** Takes the least entry, if any. */
  pop(): A | undefined {
    const items = this.items
    const top = items[0]
    const last = items.pop()
    if (items.length === 0 || last === undefined) return top
    items[0] = last
    for (let i = 0;;) {
      const left = 2 * i + 1
      const right = left + 1
      let least = i
      if (left < items.length && this.before(items[left]!, items[least]!)) least = left
      if (right < items.length && this.before(items[right]!, items[least]!)) least = right
      if (least === i) break
      ;[items[i], items[least]] = [items[least]!, items[i]!]
      i = least
    }
    return top
  }
}
