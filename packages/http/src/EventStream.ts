/**
 * The events of GET /api/v1/task/{taskId}/events as text: a `task` event for the task at
 * once and at every change of status (or update), and a `progress` event when only its
 * progress changed, at most one per 500 ms of Clock time per stream (docs/decisions.md
 * "Progress"). A `progress` event is never waited for: one under 500 ms after the last is
 * dropped (the next, or the next `task` event, carries what it said); `task` events are
 * never held back.
 */
import type { Task } from "@mediagate/core"
import { Progress } from "@mediagate/core"
import { Clock, Effect, Option, Stream } from "effect"

/** A server-sent event. */
const event = (name: string, data: unknown): string => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`

/** The data of a `progress` event: the task's id and status, and its progress. */
export const progressData = (task: Task.Task) => ({ taskId: task.taskId, status: task.status, progress: task.progress })

/** The events of a task's changes (`TaskService.watch`). */
export const sse = <E, R>(changes: Stream.Stream<Task.Task, E, R>): Stream.Stream<string, E, R> =>
  Stream.suspend(() => {
    let last: Task.Task | undefined
    let progressSentAt = Number.NEGATIVE_INFINITY
    return changes.pipe(
      Stream.mapEffect((task) =>
        Effect.map(Clock.currentTimeMillis, (now): Option.Option<string> => {
          const previous = last
          last = task
          if (previous === undefined || previous.status !== task.status || previous.updated_at !== task.updated_at) {
            return Option.some(event("task", task))
          }
          if (task.progress === null || task.progress.updated_at === previous.progress?.updated_at) return Option.none()
          if (now - progressSentAt < Progress.throttleMillis) return Option.none()
          progressSentAt = now
          return Option.some(event("progress", progressData(task)))
        })
      ),
      Stream.filterMap((text) => text)
    )
  })
