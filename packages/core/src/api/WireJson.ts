/**
 * The hot answers' JSON written without Schema: the query's task (`TaskResponse`) and
 * submit's acknowledgement (`SubmitResponse`). HttpApi would encode each answer through its
 * Schema, which checks every field of a value the use case has just made in that shape and
 * then copies it; here each struct is copied once, its keys in the Schema's order (what the
 * encoding gives) and nothing beyond them, and stringified. The answers are byte for byte
 * the Schema's (test: `WireJson.test.ts`, over many task shapes).
 */
import type { Adjustment, Task, TaskResult, WireProgress } from "../domain/Task.js"

type WireAttempt = Task["attempts"][number]

const result = (value: TaskResult): TaskResult => ({ type: value.type, urls: value.urls })

const adjustment = (value: Adjustment): Adjustment => ({
  field: value.field,
  requested: value.requested,
  applied: value.applied,
  reason: value.reason
})

const attempt = (value: WireAttempt): WireAttempt => ({
  attempt: value.attempt,
  model: value.model,
  provider: value.provider,
  upstream_id: value.upstream_id,
  started_at: value.started_at,
  ended_at: value.ended_at,
  outcome: value.outcome,
  error: value.error
})

const progress = (value: WireProgress): WireProgress => ({
  stage: value.stage,
  queue_position: value.queue_position,
  percent: value.percent,
  logs_tail: value.logs_tail,
  updated_at: value.updated_at
})

/**
 * The input as the Schema's record encoding gives it: the same object, unless it has an own
 * `__proto__` key (JSON.parse makes one), which the encoding's assignment takes for the
 * prototype. A submitted input never has one (its decoding made the same assignment).
 */
const input = (value: Task["input"]): Task["input"] => {
  if (!Object.hasOwn(value, "__proto__")) return value
  const assigned: Record<string, unknown> = {}
  for (const key of Object.keys(value)) assigned[key] = value[key]
  return assigned
}

/** A task in its wire shape, as the `Task` Schema encodes it (its input and the adjustments' values as they are: unknown to the Schema too). */
export const taskEncoded = (task: Task): Task => ({
  taskId: task.taskId,
  status: task.status,
  input: input(task.input),
  result: task.result === null ? null : result(task.result),
  failure_reason: task.failure_reason,
  created_at: task.created_at,
  updated_at: task.updated_at,
  adjustments: task.adjustments.map(adjustment),
  error: task.error,
  attempts: task.attempts.map(attempt),
  price_micro_usd: task.price_micro_usd,
  progress: task.progress === null ? null : progress(task.progress)
})

/** The query's answer (`TaskResponse`) as JSON text. */
export const taskResponse = (task: Task): string => JSON.stringify({ code: 0, msg: "ok", data: taskEncoded(task) })

/** Submit's answer (`SubmitResponse`) as JSON text. */
export const submitResponse = (taskId: string): string => `{"code":0,"msg":"ok","data":{"taskId":${JSON.stringify(taskId)}}}`
