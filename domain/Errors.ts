import { Data } from "effect"

/** Domain failures: what went wrong, without any HTTP detail. */
export class NotFound extends Data.TaggedError("NotFound")<{ readonly entity: string; readonly id: string }> {}
export class SlugTaken extends Data.TaggedError("SlugTaken")<{ readonly slug: string }> {}
export class LinkDisabled extends Data.TaggedError("LinkDisabled")<{ readonly id: string }> {}
export class UrlNotAllowed extends Data.TaggedError("UrlNotAllowed")<{ readonly reason: string }> {}
