/** The options of the use cases' spans (`Effect.fn("TaskService.x", spanOptions)`). */

/** Spans without stack traces: capturing one costs about as much as the span (bench:costs). */
export const spanOptions = { captureStackTrace: false }
