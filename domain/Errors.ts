import { Data } from "effect"

/**
 * Domain failures: what went wrong, in words a client can act on (`message`) and, when it
 * helps, what exactly (`detail`: the field and the rule, or the limit), without any HTTP
 * detail. The API answers each with an error of its catalogue (apps/api/Errors.ts,
 * `fromDomain`); the CLI prints them.
 */
interface Explained {
  readonly message: string
  readonly detail?: string | undefined
}

/** No such entity for this account (another account's is no such entity either). */
export class NotFound extends Data.TaggedError("NotFound")<Explained> {}
/** The input breaks a rule the schema cannot express. */
export class InvalidInput extends Data.TaggedError("InvalidInput")<Explained> {}
/** The bytes are not of a kind the service takes (an upload that is no supported image). */
export class UnsupportedContent extends Data.TaggedError("UnsupportedContent")<Explained> {}
/** A limit of the account's plan is reached. */
export class QuotaExceeded extends Data.TaggedError("QuotaExceeded")<Explained> {}
/** The custom slug is in use or reserved. */
export class SlugTaken extends Data.TaggedError("SlugTaken")<Explained> {}
/** The hostname is registered (and not disabled) already, by this account or another. */
export class DomainTaken extends Data.TaggedError("DomainTaken")<Explained> {}
/** A disabled domain cannot be verified (register the hostname again instead). */
export class DomainDisabled extends Data.TaggedError("DomainDisabled")<Explained> {}
/** A disabled link cannot change. */
export class LinkDisabled extends Data.TaggedError("LinkDisabled")<Explained> {}
/** The account already has a UTM preset with this name. */
export class NameTaken extends Data.TaggedError("NameTaken")<Explained> {}
/** The image's conversion failed for good: it cannot be rated. */
export class ImageFailed extends Data.TaggedError("ImageFailed")<Explained> {}
/** A URL the service may not link to or fetch; `reason` says why. */
export class UrlNotAllowed extends Data.TaggedError("UrlNotAllowed")<{
  readonly reason: string
  readonly message?: string | undefined
}> {}
/** A server-side fetch's source failed: `kind` says how (the API has a code for each). */
export class SourceFailed extends Data.TaggedError("SourceFailed")<
  Explained & {
    readonly kind:
      | "redirect_not_allowed"
      | "not_an_image"
      | "source_too_large"
      | "source_forbidden"
      | "source_unreachable"
  }
> {}

export type DomainError =
  | NotFound
  | InvalidInput
  | UnsupportedContent
  | QuotaExceeded
  | SlugTaken
  | DomainTaken
  | DomainDisabled
  | LinkDisabled
  | NameTaken
  | ImageFailed
  | UrlNotAllowed
  | SourceFailed
