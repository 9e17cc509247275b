/**
 * The due times an engine's own steps left behind (a poll 50 ms away, a retry in 2 s), so
 * the loop sleeps exactly until the next one. A binary min-heap: with thousands of tasks in
 * flight, each step adds one time and the loop drops those that have passed.
 */
export class DueTimes {
  private readonly heap: Array<number> = []

  /** The earliest time kept, or +Infinity. */
  get next(): number {
    return this.heap[0] ?? Number.POSITIVE_INFINITY
  }

  get size(): number {
    return this.heap.length
  }

  add(at: number): void {
    const heap = this.heap
    heap.push(at)
    for (let i = heap.length - 1; i > 0;) {
      const parent = (i - 1) >> 1
      if (heap[parent]! <= heap[i]!) break
      ;[heap[i], heap[parent]] = [heap[parent]!, heap[i]!]
      i = parent
    }
  }

  /** Drops every time at or before `now` (the claim that just ran took that work). */
  dropUntil(now: number): void {
    const heap = this.heap
    while (heap.length > 0 && heap[0]! <= now) {
      const last = heap.pop()!
      if (heap.length === 0) break
      heap[0] = last
      for (let i = 0; ;) {
        const left = 2 * i + 1
        const right = left + 1
        let least = i
        if (left < heap.length && heap[left]! < heap[least]!) least = left
        if (right < heap.length && heap[right]! < heap[least]!) least = right
        if (least === i) break
        ;[heap[i], heap[least]] = [heap[least]!, heap[i]!]
        i = least
      }
    }
  }
}
