/**
 * Identifiers. Everything random goes through this service, so tests can pin it.
 */
import { Clock, Context, Effect, Layer, Random, Schema } from "effect"

/** A task's id: a lowercase UUIDv7 string. */
export const TaskId = Schema.String.pipe(Schema.brand("@mediagate/TaskId"))
export type TaskId = typeof TaskId.Type

/** An account's id: the owner of tasks. */
export const AccountId = Schema.String.pipe(Schema.brand("@mediagate/AccountId"))
export type AccountId = typeof AccountId.Type

/** The id an upstream gave a job it accepted. */
export const UpstreamId = Schema.String.pipe(Schema.brand("@mediagate/UpstreamId"))
export type UpstreamId = typeof UpstreamId.Type

/** Makes task ids (UUIDv7) and opaque random tokens. */
export class Ids extends Context.Tag("@mediagate/core/Ids")<Ids, {
  /** A UUIDv7: time-ordered, so ids sort by creation. */
  readonly taskId: Effect.Effect<TaskId>
  /** `bytes` random bytes as lowercase hex. */
  readonly token: (bytes: number) => Effect.Effect<string>
}>() {}

const hex = (byte: number) => byte.toString(16).padStart(2, "0")

/**
 * Bytes from the platform's cryptographic generator (Web Crypto, global in Node 20), drawn
 * 4 KiB at a time and handed out in order, each byte once (as Node's own `randomUUID`
 * buffers its randomness): a draw costs about as much whether it is of 10 bytes or 4,096, and
 * one per id was 6% of a submit's CPU in a profile (bench:http-inprocess).
 */
const secureBytes = (): (count: number) => Effect.Effect<ReadonlyArray<number>> => {
  const pool = new Uint8Array(4096)
  let used = pool.length
  return (count) =>
    Effect.sync(() => {
      if (count > pool.length) return Array.from(globalThis.crypto.getRandomValues(new Uint8Array(count)))
      if (used + count > pool.length) {
        globalThis.crypto.getRandomValues(pool)
        used = 0
      }
      used += count
      return Array.from(pool.subarray(used - count, used))
    })
}

/** Bytes from Effect's Random service: deterministic under a seeded or test Random. */
const effectRandomBytes = (count: number): Effect.Effect<ReadonlyArray<number>> =>
  Effect.forEach(Array.from({ length: count }), () => Random.nextIntBetween(0, 256))

/** Formats a UUIDv7 from a millisecond timestamp and 10 random bytes. */
export const uuidV7 = (millis: number, random: ReadonlyArray<number>): string => {
  const bytes = new Array<number>(16)
  let time = Math.max(0, Math.floor(millis))
  for (let i = 5; i >= 0; i--) {
    bytes[i] = time % 256
    time = Math.floor(time / 256)
  }
  for (let i = 0; i < 10; i++) bytes[6 + i] = random[i] ?? 0
  bytes[6] = 0x70 | (bytes[6]! & 0x0f)
  bytes[8] = 0x80 | (bytes[8]! & 0x3f)
  const h = bytes.map(hex).join("")
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}

/**
 * Ids from Effect's Clock and the given source of random bytes. Task ids are monotonic
 * (RFC 9562, method 1): within one millisecond the 12 bits after the version count up from
 * a random start, so ids sort in the order they were made even at thousands a second.
 */
export const make = (randomBytes: (count: number) => Effect.Effect<ReadonlyArray<number>>): Context.Tag.Service<Ids> => {
  let lastMillis = -1
  let counter = 0
  const next = (now: number, random: ReadonlyArray<number>) => {
    if (now > lastMillis) {
      lastMillis = now
      counter = ((random[0]! & 0x07) << 8) | random[1]! // start in the lower half: room to count
    } else if (++counter > 0xfff) {
      lastMillis += 1 // counter exhausted (or the clock went back): borrow the next millisecond
      counter = 0
    }
    return uuidV7(lastMillis, [(counter >> 8) & 0x0f, counter & 0xff, ...random.slice(2)])
  }
  return {
    taskId: Effect.zipWith(Clock.currentTimeMillis, randomBytes(10), (millis, bytes) => TaskId.make(next(millis, bytes))),
    token: (count) => Effect.map(randomBytes(count), (bytes) => bytes.map(hex).join(""))
  }
}

/** Ids for production: time from the Clock, randomness from the platform's cryptographic generator. */
export const layer: Layer.Layer<Ids> = Layer.sync(Ids, () => make(secureBytes()))

/** Ids for tests: time from the Clock, randomness from Effect's Random, so a seed pins every id. */
export const layerTest: Layer.Layer<Ids> = Layer.sync(Ids, () => make(effectRandomBytes))
