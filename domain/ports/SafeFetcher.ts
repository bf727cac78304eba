import { Context, Data, type Effect } from "effect"
import type { UrlNotAllowed } from "../Errors.js"

/** A redirect hop was refused: bad Location, https to http, too many hops, or a hop that fails the URL rules. */
export class RedirectNotAllowed extends Data.TaggedError("RedirectNotAllowed")<{
  readonly location: string
  readonly reason: string
}> {}

/** The body is larger than the caller's cap (by Content-Length, or while it streamed). */
export class SourceTooLarge extends Data.TaggedError("SourceTooLarge")<{ readonly limit: number }> {}

/** The source answered 403: it refuses server-side fetches; the client can download and upload the file. */
export class SourceForbidden extends Data.TaggedError("SourceForbidden")<{ readonly url: string }> {}

/** No usable answer: name not resolved, connection refused or reset, TLS failure, timeout, or 5xx after retries. */
export class SourceUnreachable extends Data.TaggedError("SourceUnreachable")<{ readonly reason: string }> {}

/** The source answered with a status that is not a success, a redirect, 403 or 5xx (e.g. 404, 410, 304). */
export class SourceRejected extends Data.TaggedError("SourceRejected")<{ readonly status: number }> {}

export type FetchError =
  | UrlNotAllowed
  | RedirectNotAllowed
  | SourceTooLarge
  | SourceForbidden
  | SourceUnreachable
  | SourceRejected

export interface FetchOptions {
  /** Hard cap on the body; a larger Content-Length is refused before reading. */
  readonly maxBytes: number
  /** Bound on the whole fetch: resolution, every hop, every retry. Default 10 000. */
  readonly timeoutMs?: number
  /** Redirects followed at most; one more is RedirectNotAllowed. Default 3. */
  readonly maxRedirects?: number
  /** The Accept header. Default `*\/*`. */
  readonly accept?: string
}

export interface FetchedResponse {
  /** The URL that answered, after redirects, without fragment. */
  readonly finalUrl: string
  /** Always 2xx. */
  readonly status: number
  /** Lower-case names; repeated headers joined with ", ". */
  readonly headers: Readonly<Record<string, string>>
  /**
   * The bytes exactly as sent. Identity encoding is requested and nothing is ever
   * decompressed, so a Content-Encoding the server imposes anyway leaves the bytes encoded.
   */
  readonly body: Uint8Array
}

export interface SafeFetcherService {
  /**
   * GET `url` following at most `maxRedirects` redirects, each hop held to the same rules:
   * http(s) only, no credentials, not one of the service's own hosts, and every address the
   * name resolves to public (see domain/AddressPolicy). The connection goes to the address
   * that was checked, never to a second resolution.
   */
  readonly fetch: (url: string, options: FetchOptions) => Effect.Effect<FetchedResponse, FetchError>
  /**
   * The rules `fetch` applies before resolving any name: scheme, credentials, the service's
   * own hosts and literal addresses (in any notation). For refusing a URL at once (POST
   * /snapshots) before a later fetch; absent: only the scheme is checked.
   */
  readonly precheck?: (url: string) => Effect.Effect<void, UrlNotAllowed>
}

/** The one outbound HTTP client: every fetch of a URL a user supplied goes through it. */
export class SafeFetcher extends Context.Tag("SafeFetcher")<SafeFetcher, SafeFetcherService>() {}
