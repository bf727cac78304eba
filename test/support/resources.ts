/**
 * The JSON bodies of the API as the tests read them (the wire shapes of the contract), for
 * `call<B>` and `rawRequest<B>`: declared here, independently of the server's schemas, and
 * never validated; the tests' assertions check what they read.
 */

/** A success body: the resource in `data`, the request id in `meta`. */
export interface Envelope<D> {
  readonly data: D
  readonly meta: { readonly request_id: string }
}

/** One page of a collection, newest first. */
export interface Page<D> {
  readonly data: ReadonlyArray<D>
  readonly meta: { readonly request_id: string; readonly next_cursor: string | null }
}

/** The `error` member of an error body. */
export interface ApiError {
  readonly code: string
  readonly message: string
  readonly request_id: string
  readonly detail?: string
}

/** An error body. */
export interface ErrorBody {
  readonly error: ApiError
}

/** UTM parameters, utm_source to utm_content. */
export type Utm = Readonly<Record<string, string>>

/** A Short Link. */
export interface Link {
  readonly id: string
  readonly slug: string
  readonly short_url: string
  readonly destination_url: string
  readonly publication_status: "active" | "disabled"
  readonly created_at: string
  readonly updated_at: string
  readonly expires_at: string | null
  readonly utm: Utm | null
  readonly short_urls: ReadonlyArray<string>
}

/** GET/PATCH /links/{id}/options. */
export interface LinkOptions {
  readonly utm: Utm | null
  readonly expires_at: string | null
}

/** A UTM preset. */
export interface UtmPreset {
  readonly id: string
  readonly name: string
  readonly utm: Utm
  readonly created_at: string
  readonly updated_at: string
}

/** A Hosted Image; width, height, bytes and animated are null until it is ready. */
export interface Image {
  readonly id: string
  readonly status: "processing" | "ready" | "failed"
  readonly status_url: string
  readonly url: string
  readonly share_url: string
  readonly mime_type: string
  readonly content_rating: "general" | "sensitive" | "nsfw" | "unrated" | null
  readonly rating_source: "owner" | "classifier" | "operator" | null
  readonly rating_review: {
    readonly requested: "general" | "sensitive" | "nsfw"
    readonly status: "pending" | "approved" | "rejected"
  } | null
  readonly width: number | null
  readonly height: number | null
  readonly bytes: number | null
  readonly animated: boolean | null
  readonly failure: string | null
  readonly created_at: string
}

/** A used amount and its limit (null for an Unmetered Partner Key). */
export interface Quota {
  readonly used: number
  readonly limit: number | null
}

/** GET /usage. */
export interface Usage {
  readonly plan: string
  readonly links: Quota
  readonly images: {
    readonly uploads: Quota
    readonly storage_bytes: Quota & { readonly total_used: number; readonly unmetered_used: number }
  }
  readonly snapshots: Quota
}

/** A snapshot record. */
export interface Snapshot {
  readonly id: string
  readonly url: string
  readonly final_url: string | null
  readonly http_status: number | null
  readonly title: string | null
  readonly content_type: string | null
  readonly bytes: number | null
  readonly sha256: string | null
  readonly resources: { readonly count: number; readonly bytes: number }
  readonly capture_status: string
  readonly publication_status: string
  readonly failure: string | null
  readonly snapshot_url: string
  readonly warc_url: string
  readonly captured_at: string | null
}

/** One value of an analytics breakdown. */
export interface AnalyticsValue {
  readonly value: string
  readonly clicks: number
}

/** GET /links/{id}/analytics. */
export interface LinkAnalytics {
  readonly link_id: string
  readonly from: string
  readonly to: string
  readonly granularity: "hour" | "day"
  readonly totals: { readonly clicks: number; readonly unique_visitors: number; readonly bot_clicks: number }
  readonly series: ReadonlyArray<{ readonly start: string; readonly clicks: number; readonly unique_visitors: number }>
  readonly breakdowns: {
    readonly country?: ReadonlyArray<AnalyticsValue>
    readonly referrer?: ReadonlyArray<AnalyticsValue>
    readonly device?: ReadonlyArray<AnalyticsValue>
    readonly browser?: ReadonlyArray<AnalyticsValue>
  }
}

/** A custom domain. */
export interface Domain {
  readonly id: string
  readonly hostname: string
  readonly state: "pending" | "verified" | "disabled"
  readonly verification: { readonly method: "dns_txt"; readonly record_name: string; readonly record_value: string }
  readonly last_error: string | null
  readonly last_checked_at: string | null
  readonly verified_at: string | null
  readonly created_at: string
  readonly updated_at: string
}
