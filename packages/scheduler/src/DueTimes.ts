/**
 * The due times an engine's own steps left behind (a poll 20 ms away, a retry in 2 s), so
 * the loop sleeps exactly until the next one. A min-heap: with thousands of tasks in
 * flight, each step adds one time and the loop drops those that have passed.
 */
import { Heap } from "@mediagate/core"

export class DueTimes {
  private readonly heap = new Heap<number>((a, b) => a < b)

  /** The earliest time kept, or +Infinity. */
  get next(): number {
    return this.heap.peek() ?? Number.POSITIVE_INFINITY
  }

  get size(): number {
    return this.heap.size
  }

  add(at: number): void {
    this.heap.push(at)
  }

  /** Drops every time at or before `now` (the claim that just ran took that work). */
  dropUntil(now: number): void {
    while (this.heap.size > 0 && this.heap.peek()! <= now) this.heap.pop()
  }
}
