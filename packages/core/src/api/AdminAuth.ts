/**
 * Authentication of the admin API (`/api/v1/admin/...`): an admin key (`AdminKeys`) as a
 * bearer token. A customer key is 403 on every admin path; no key, or a key that is neither,
 * is 401. Handlers of the admin groups read the admin from `CurrentAdmin`.
 */
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { CurrentAdmin } from "../admin/AdminService.js"
import { Forbidden, Unauthorized } from "./Envelope.js"

const adminKey = HttpApiSecurity.bearer.pipe(
  HttpApiSecurity.annotate(
    OpenApi.Description,
    "An admin key (`npm run admin -- key create --admin`, or `MEDIAGATE_ADMIN_KEY`), sent as `Authorization: Bearer <key>`. A customer key is answered 403 on every admin path."
  )
)

/** Admin-key authentication; provides the admin key's info. */
export class AdminAuthorization extends HttpApiMiddleware.Tag<AdminAuthorization>()("@mediagate/core/AdminAuthorization", {
  failure: Schema.Union(Unauthorized, Forbidden),
  provides: CurrentAdmin,
  security: { adminBearer: adminKey }
}) {}
