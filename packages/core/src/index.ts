/** Accounts, API keys and the current request's account. */
export * as Accounts from "./Accounts.js"
/** The HTTP contract: endpoints, envelope, errors. */
export * as Api from "./Api.js"
/** Domain errors. */
export * from "./Errors.js"
/** Task ids and random tokens. */
export * as Ids from "./Ids.js"
/** Hosting of produced files. */
export * as MediaStore from "./MediaStore.js"
/** The model catalog. */
export * as ModelCatalog from "./models/ModelCatalog.js"
/** alpha-image-2. */
export * as AlphaImage2 from "./models/AlphaImage2.js"
/** Schema building blocks of model inputs. */
export * as Fields from "./models/Fields.js"
export type { ModelSpec } from "./models/ModelSpec.js"
/** Pre-submission moderation. */
export * as Moderation from "./Moderation.js"
/** Tasks: statuses, records, the wire shape. */
export * as Task from "./Task.js"
/** Engine nudges. */
export * as TaskEvents from "./TaskEvents.js"
/** Submit and query. */
export * from "./TaskService.js"
/** The task store. */
export * as TaskStore from "./TaskStore.js"
/** The state machine. */
export * as Transition from "./Transition.js"
/** Upstream providers. */
export * as Upstream from "./Upstream.js"
/** Which client URLs are acceptable. */
export * as UrlPolicy from "./UrlPolicy.js"
