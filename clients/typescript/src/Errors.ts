/**
 * The API's errors, typed by code. An operation of the Effect client fails with the error
 * bodies its endpoint declares (`{ error: { code, message, request_id, detail? } }`, one
 * type per code), or with a transport / decoding error of @effect/platform.
 */

/** The error body of the contract. */
export interface ErrorBody<Code extends string = string> {
  readonly error: {
    readonly code: Code
    readonly message: string
    readonly request_id: string
    readonly detail?: string | undefined
  }
}

/** Whether a failure is an error body of the API (then `error.code` says which). */
export const isErrorBody = (failure: unknown): failure is ErrorBody => {
  if (typeof failure !== "object" || failure === null || !("error" in failure)) return false
  const error = (failure as { readonly error: unknown }).error
  return typeof error === "object" && error !== null && typeof (error as { code?: unknown }).code === "string"
}

/** The code of a failure of the API's, narrowing its type: `hasCode(e, "not_found")`. */
export const hasCode = <E, const Code extends string>(failure: E, code: Code): failure is Extract<E, ErrorBody<Code>> =>
  isErrorBody(failure) && failure.error.code === code

/** What the Promise facade rejects with for an error answer of the API. */
export class ApiError extends Error {
  override readonly name = "ApiError"
  readonly code: string
  readonly requestId: string
  readonly detail: string | undefined
  constructor(body: ErrorBody) {
    super(`${body.error.code}: ${body.error.message}`)
    this.code = body.error.code
    this.requestId = body.error.request_id
    this.detail = body.error.detail
  }
}
