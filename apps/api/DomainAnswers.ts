import { Effect } from "effect"
import * as D from "../../domain/Errors.js"
import * as E from "./Errors.js"

/**
 * How the API answers the domain failures of the services (domain/Errors.ts): each with the
 * error of the catalogue (Errors.ts) that says it, typed so that a handler compiles only when
 * its endpoint declares an error for every failure its service can give.
 */

const SOURCE_FAILURES = {
  redirect_not_allowed: E.RedirectNotAllowed,
  not_an_image: E.NotAnImage,
  source_too_large: E.SourceTooLarge,
  source_forbidden: E.SourceForbidden,
  source_unreachable: E.SourceUnreachable
} as const

/** The catalogue entry that answers each domain failure. */
const defOfDomain = (error: D.DomainError): E.ErrorDef => {
  switch (error._tag) {
    case "NotFound":
      return E.NotFound
    case "InvalidInput":
      return E.InvalidRequest
    case "UnsupportedContent":
      return E.UnsupportedMediaType
    case "QuotaExceeded":
      return E.QuotaExceeded
    case "SlugTaken":
      return E.SlugTaken
    case "DomainTaken":
      return E.DomainTaken
    case "DomainDisabled":
      return E.DomainDisabled
    case "LinkDisabled":
      return E.LinkDisabled
    case "NameTaken":
      return E.UtmPresetNameTaken
    case "ImageFailed":
      return E.ImageFailed
    case "UrlNotAllowed":
      return E.UrlNotAllowed
    case "SourceFailed":
      return SOURCE_FAILURES[error.kind]
  }
}

/** The API's answer to a domain failure: the error of the catalogue for it, with its message and detail. */
export const fromDomain = (error: D.DomainError): Effect.Effect<never, E.ErrorBody> => {
  const def = defOfDomain(error)
  const [message, detail] =
    error._tag === "UrlNotAllowed"
      ? [error.message ?? "The URL is not allowed.", error.reason]
      : [error.message, error.detail]
  return E.fail(def as typeof E.InvalidRequest, message, detail) as Effect.Effect<never, E.ErrorBody>
}

/** The body of the catalogue's error that answers each domain failure (as `defOfDomain` maps them). */
interface DomainAnswers {
  readonly NotFound: typeof E.NotFound.Type
  readonly InvalidInput: typeof E.InvalidRequest.Type
  readonly UnsupportedContent: typeof E.UnsupportedMediaType.Type
  readonly QuotaExceeded: typeof E.QuotaExceeded.Type
  readonly SlugTaken: typeof E.SlugTaken.Type
  readonly DomainTaken: typeof E.DomainTaken.Type
  readonly DomainDisabled: typeof E.DomainDisabled.Type
  readonly LinkDisabled: typeof E.LinkDisabled.Type
  readonly NameTaken: typeof E.UtmPresetNameTaken.Type
  readonly ImageFailed: typeof E.ImageFailed.Type
  readonly UrlNotAllowed: typeof E.UrlNotAllowed.Type
  readonly SourceFailed: (typeof SOURCE_FAILURES)[keyof typeof SOURCE_FAILURES]["Type"]
}

/**
 * The catalogue's errors that answer the domain failures in `Err`: so a handler type-checks
 * only when its endpoint declares an error for every failure its service can give.
 */
export type AnswerOf<Err> = Err extends D.DomainError ? DomainAnswers[Err["_tag"]] : never

/** Answers a service's domain failures with the catalogue's errors; other failures pass. */
export const mapDomainErrors = <A, Err, R>(
  effect: Effect.Effect<A, Err, R>
): Effect.Effect<A, Exclude<Err, D.DomainError> | AnswerOf<Err>, R> =>
  Effect.catchIf(effect, isDomainError, fromDomain) as Effect.Effect<A, Exclude<Err, D.DomainError> | AnswerOf<Err>, R>

const DOMAIN_ERRORS = [
  D.NotFound,
  D.InvalidInput,
  D.UnsupportedContent,
  D.QuotaExceeded,
  D.SlugTaken,
  D.DomainTaken,
  D.DomainDisabled,
  D.LinkDisabled,
  D.NameTaken,
  D.ImageFailed,
  D.UrlNotAllowed,
  D.SourceFailed
]

const isDomainError = (u: unknown): u is D.DomainError => DOMAIN_ERRORS.some((c) => u instanceof c)
