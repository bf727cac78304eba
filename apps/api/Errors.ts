import { HttpApiSchema, HttpServerResponse } from "@effect/platform"
import { Effect, FiberRef, Schema } from "effect"

/** The request id of the request being served; set by the RequestId middleware for each request. */
export const CurrentRequestId = FiberRef.unsafeMake("")

const pascal = (code: string) => code.replace(/(^|_)([a-z])/g, (_, __, c: string) => c.toUpperCase())

/**
 * One error of the catalogue: its status, its code, the contract's error body, and whether a
 * POST, PATCH or DELETE that ends with it is stored for idempotent replay. Rejections made
 * before the operation ran (authentication, scope, rate, validation, body limits, the
 * idempotency check's own answers) and 5xx are not stored, so the key stays usable once the
 * request is fixed. Every error the API returns is one of these.
 */
const define = <const Code extends string>(
  status: number,
  code: Code,
  description: string,
  options: { readonly stored: boolean } = { stored: status < 500 }
) => {
  const schema = Schema.Struct({
    error: Schema.Struct({
      code: Schema.Literal(code),
      message: Schema.String.annotations({ description: "Human-readable. Never branch on it." }),
      request_id: Schema.String,
      detail: Schema.optional(Schema.String)
    })
  }).annotations({
    identifier: `${pascal(code)}Error`,
    description,
    ...HttpApiSchema.annotations({ status })
  })
  const def = Object.assign(schema, { status, code, stored: options.stored })
  catalogue.set(code, def)
  return def
}

export type ErrorDef = { readonly status: number; readonly code: string; readonly stored: boolean }

const catalogue = new Map<string, ErrorDef>()
const notStored = { stored: false } as const

/** The catalogue entry of an error body's code. */
export const errorDefOf = (code: string): ErrorDef | undefined => catalogue.get(code)

// 400
export const InvalidRequest = define(
  400,
  "invalid_request",
  "The request is malformed or fails validation; `detail` names the field and the rule.",
  notStored
)
export const IdempotencyKeyRequired = define(
  400,
  "idempotency_key_required",
  "The Idempotency-Key header is missing.",
  notStored
)
export const IdempotencyKeyInvalid = define(
  400,
  "idempotency_key_invalid",
  "The Idempotency-Key header is not 8 to 128 characters.",
  notStored
)
// 401
export const Unauthenticated = define(
  401,
  "unauthenticated",
  "Missing, malformed, unknown or revoked API key, or a key sent anywhere but the Authorization header.",
  notStored
)
// 403
export const ApiScopeRequired = define(
  403,
  "api_scope_required",
  "The key lacks the scope this operation needs; `detail` names it.",
  notStored
)
export const EntitlementRequired = define(
  403,
  "entitlement_required",
  "The account's plan does not include this feature."
)
export const QuotaExceeded = define(
  403,
  "quota_exceeded",
  "A limit of the account's plan is reached; `detail` names it and the limit (e.g. `links_per_month: 100 of 100 used`, or `link_expiry_max_days` for an expires_at too far ahead). Monthly quotas reset at the start of each calendar month (UTC). Unmetered Partner Keys skip plan limits."
)
// 404
export const NotFound = define(404, "not_found", "No such resource for this account, or no such route.")
// 405, 408
export const MethodNotAllowed = define(
  405,
  "method_not_allowed",
  "The path exists but does not take this method (PUT, TRACE, or a method HTTP does not know); the Allow header lists the methods it takes.",
  notStored
)
export const RequestTimeout = define(
  408,
  "request_timeout",
  "The request line and headers did not arrive within 10 seconds, or the whole request (body included) within 60 seconds (HTTP_HEADER_TIMEOUT_MS, HTTP_REQUEST_TIMEOUT_MS); the connection is closed.",
  notStored
)
// 409
export const IdempotencyKeyReused = define(
  409,
  "idempotency_key_reused",
  "The Idempotency-Key was used before with a different request.",
  notStored
)
export const IdempotencyRequestInProgress = define(
  409,
  "idempotency_request_in_progress",
  "A request with this Idempotency-Key is still being processed; retry after Retry-After seconds.",
  notStored
)
export const SlugTaken = define(409, "slug_taken", "The custom slug is already in use or reserved.")
export const DomainTaken = define(
  409,
  "domain_taken",
  "The hostname is already registered (and not disabled), by this account or another: one registration per hostname at a time."
)
export const DomainDisabled = define(
  409,
  "domain_disabled",
  "The domain is disabled and cannot be verified; register the hostname again (a new registration gets a new token)."
)
export const LinkDisabled = define(409, "link_disabled", "The link is disabled and cannot be changed.")
export const ImageFailed = define(
  409,
  "image_failed",
  "The image's conversion failed for good (its `failure` says why): it is never published, so it cannot be rated. Delete it and upload the file again, fixed."
)
export const UtmPresetNameTaken = define(
  409,
  "utm_preset_name_taken",
  "The account already has a UTM preset with this name."
)
// 413, 415
export const PayloadTooLarge = define(
  413,
  "payload_too_large",
  "The request body is larger than this endpoint accepts: JSON bodies 1048576 bytes; an image file 10485760 bytes (a multipart body may carry at most 65536 bytes of form data besides). An upload is refused as soon as it passes the limit, without reading the rest, and the connection is closed.",
  notStored
)
export const UnsupportedMediaType = define(
  415,
  "unsupported_media_type",
  "The Content-Type is not one this endpoint accepts, or (image uploads) the bytes are not a JPEG, PNG, WebP or GIF image whatever type was declared.",
  notStored
)
// 431
export const HeadersTooLarge = define(
  431,
  "headers_too_large",
  "The request line and headers together are larger than 16384 bytes (a very long URL, or too many or too large headers); the connection is closed.",
  notStored
)
// 422
export const UrlNotAllowed = define(
  422,
  "url_not_allowed",
  "The URL is not allowed. A link destination is refused when it points back at this service (one of its own hosts, or a loopback name or address such as localhost, 127.0.0.1 or [::1] on one of its ports), because the short link would loop; private addresses are otherwise valid destinations, since links are never fetched by the server. Server-side fetches (POST /images/url, and snapshots) also refuse private, loopback, link-local, metadata and reserved addresses in any notation (decimal, octal, hexadecimal, IPv4-mapped IPv6 and the like), schemes other than http and https, URLs with credentials, and the service's own hosts."
)
export const RedirectNotAllowed = define(
  422,
  "redirect_not_allowed",
  "The source redirected somewhere a server-side fetch may not go: a private or reserved address, another scheme, https to http, or more than 3 redirects."
)
export const NotAnImage = define(
  422,
  "not_an_image",
  "The source answered, but its bytes are not a JPEG, PNG, WebP or GIF image (for example an HTML page or a post that shows an image): give the URL of the image file itself."
)
export const SourceTooLarge = define(
  422,
  "source_too_large",
  "The source's response is larger than the 10485760-byte image file limit."
)
export const SourceForbidden = define(
  422,
  "source_forbidden",
  "The source answered 403 to the server-side fetch. Download the file yourself and upload its bytes to POST /images as multipart/form-data (part `file`)."
)
export const SourceUnreachable = define(
  422,
  "source_unreachable",
  "The source gave no usable answer: the name did not resolve, the connection failed or timed out (15 s), it answered 5xx after retries, or it answered with another non-success status such as 404."
)
// 429
export const RateLimited = define(
  429,
  "rate_limited",
  "Too many requests for this account (its plan's request rate and burst); retry after Retry-After seconds. Unmetered Partner Keys skip it.",
  notStored
)
// 500, 503
export const InternalError = define(
  500,
  "internal_error",
  "An unexpected failure on the server; report the request_id."
)
export const DependencyUnavailable = define(
  503,
  "dependency_unavailable",
  "A dependency is temporarily unavailable; retry after Retry-After seconds."
)

export type ErrorBody = {
  readonly error: {
    readonly code: string
    readonly message: string
    readonly request_id: string
    readonly detail?: string
  }
}

/** Response headers an error carries besides its body (Retry-After): not part of the JSON. */
const HEADERS = Symbol.for("shortlinks/ErrorHeaders")

export const errorBody = (
  def: { readonly code: string },
  requestId: string,
  message: string,
  detail?: string,
  headers?: Readonly<Record<string, string>>
): ErrorBody => {
  const body: ErrorBody = {
    error:
      detail === undefined
        ? { code: def.code, message, request_id: requestId }
        : { code: def.code, message, request_id: requestId, detail }
  }
  if (headers !== undefined) Object.defineProperty(body, HEADERS, { value: headers, enumerable: false })
  return body
}

/** Whether a failure is an error of the catalogue (its body), and its entry. */
export const catalogued = (u: unknown): ErrorDef | undefined => {
  if (typeof u !== "object" || u === null || !("error" in u)) return undefined
  const error = (u as { readonly error: unknown }).error
  if (typeof error !== "object" || error === null || !("code" in error)) return undefined
  const code = (error as { readonly code: unknown }).code
  return typeof code === "string" ? catalogue.get(code) : undefined
}

/** The response of an error of the catalogue: its status, its body, its headers. */
export const toResponse = (def: ErrorDef, body: ErrorBody): HttpServerResponse.HttpServerResponse => {
  const headers = (body as { readonly [HEADERS]?: Readonly<Record<string, string>> })[HEADERS]
  return HttpServerResponse.unsafeJson(body, { status: def.status, ...(headers === undefined ? {} : { headers }) })
}

/** Fails the current request with an error of the catalogue. */
export const fail = <D extends Schema.Schema.Any & { readonly code: string }>(
  def: D,
  message: string,
  detail?: string,
  headers?: Readonly<Record<string, string>>
): Effect.Effect<never, Schema.Schema.Type<D>> =>
  Effect.flatMap(FiberRef.get(CurrentRequestId), (id) =>
    Effect.fail(errorBody(def, id, message, detail, headers) as Schema.Schema.Type<D>)
  )

/** The response for an error of the catalogue, outside any handler (request guards, defects). */
export const respond = (
  def: ErrorDef,
  requestId: string,
  message: string,
  detail?: string,
  headers?: Readonly<Record<string, string>>
): HttpServerResponse.HttpServerResponse => toResponse(def, errorBody(def, requestId, message, detail, headers))
