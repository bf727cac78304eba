import type { LinkAnalytics } from "./Analytics/Api.js"
import type { Domain } from "./Domains/Api.js"
import type { Image } from "./Images/Api.js"
import type { Link } from "./Links/Api.js"
import type { Snapshot } from "./Snapshots/Api.js"
import type { AccountUsage } from "./Usage/Api.js"

/**
 * Examples of the main operations, as the OpenAPI document shows them (OpenApiDoc.ts puts
 * them on the media types). The values are the wire form of the schemas the server decodes
 * and encodes with: the compiler checks their shape here, test/unit/openapi-examples.test.ts
 * decodes each one with its endpoint's own schema, and Redocly's
 * no-invalid-media-type-examples checks them against the document.
 */
export interface Example {
  readonly summary: string
  readonly description?: string
  /** Absent for bytes, which a JSON document cannot hold: `description` says how to send them. */
  readonly value?: unknown
}
export type Examples = Readonly<Record<string, Example>>

export interface OperationExamples {
  /** Request body examples by media type. */
  readonly request?: Readonly<Record<string, Examples>>
  /** Response examples (application/json) by status. */
  readonly responses?: Readonly<Record<number, Examples>>
}

// Hosts under the reserved .example TLD (RFC 2606): {base_url}, {short_base}, {image_host}, {snapshot_host}.
const API = "https://api.shortlinks.example/v1"
const SHORT = "https://sl.example"
const IMAGES = "https://img.shortlinks.example"
const SNAPSHOTS = "https://snap.shortlinks.example"
const meta = { request_id: "req_9f2c1e7a4b6d4c3e" }

const link: typeof Link.Encoded = {
  id: "link_6Zq1VbN3kT8rWx2YpLm4Hc",
  slug: "spring-sale",
  short_url: `${SHORT}/spring-sale`,
  destination_url: "https://shop.example.com/sale?ref=newsletter",
  publication_status: "active",
  created_at: "2026-03-02T09:15:27.412Z",
  updated_at: "2026-03-02T09:15:27.412Z",
  expires_at: null,
  utm: null,
  short_urls: [`${SHORT}/spring-sale`, "https://go.example.org/spring-sale"]
}
const randomLink: typeof Link.Encoded = {
  ...link,
  id: "link_2Pd8sKc0QeR5uFw7JyAa9N",
  slug: "aZ3k9Qx",
  short_url: `${SHORT}/aZ3k9Qx`,
  destination_url: "https://docs.example.com/guide/getting-started",
  created_at: "2026-03-01T17:40:03.000Z",
  updated_at: "2026-03-01T17:40:03.000Z",
  utm: { utm_source: "newsletter", utm_medium: "email" },
  short_urls: [`${SHORT}/aZ3k9Qx`]
}

const processingImage: typeof Image.Encoded = {
  id: "Xb7Lq2M",
  status: "processing",
  status_url: `${API}/images/Xb7Lq2M`,
  url: `${IMAGES}/Xb7Lq2M.webp`,
  share_url: `${IMAGES}/v/Xb7Lq2M`,
  mime_type: "image/webp",
  content_rating: null,
  rating_source: null,
  rating_review: null,
  width: null,
  height: null,
  bytes: null,
  animated: null,
  failure: null,
  created_at: "2026-03-02T10:01:44.950Z"
}
const readyImage: typeof Image.Encoded = {
  ...processingImage,
  status: "ready",
  content_rating: "general",
  rating_source: "classifier",
  width: 1600,
  height: 900,
  bytes: 184_322,
  animated: false
}

const analytics: typeof LinkAnalytics.Encoded = {
  link_id: link.id,
  from: "2026-02-27T00:00:00.000Z",
  to: "2026-03-02T00:00:00.000Z",
  granularity: "day",
  totals: { clicks: 1342, unique_visitors: 987, bot_clicks: 58 },
  series: [
    { start: "2026-02-27T00:00:00.000Z", clicks: 120, unique_visitors: 101 },
    { start: "2026-02-28T00:00:00.000Z", clicks: 403, unique_visitors: 311 },
    { start: "2026-03-01T00:00:00.000Z", clicks: 819, unique_visitors: 575 }
  ],
  breakdowns: {
    country: [
      { value: "DE", clicks: 612 },
      { value: "FR", clicks: 344 },
      { value: "US", clicks: 301 },
      { value: "other", clicks: 85 }
    ],
    referrer: [
      { value: "direct", clicks: 702 },
      { value: "news.example.net", clicks: 577 },
      { value: "other", clicks: 63 }
    ],
    device: [
      { value: "mobile", clicks: 851 },
      { value: "desktop", clicks: 470 },
      { value: "other", clicks: 21 }
    ],
    browser: [
      { value: "Chrome", clicks: 690 },
      { value: "Safari", clicks: 452 },
      { value: "Firefox", clicks: 163 },
      { value: "other", clicks: 37 }
    ]
  }
}

const snapshot: typeof Snapshot.Encoded = {
  id: "snap_4Hn7tRb2XcV9mKq1LsZe8W",
  url: "https://news.example.net/2026/03/launch",
  final_url: null,
  http_status: null,
  title: null,
  content_type: null,
  bytes: null,
  sha256: null,
  resources: { count: 0, bytes: 0 },
  capture_status: "queued",
  publication_status: "unpublished",
  failure: null,
  created_at: "2026-03-02T11:20:05.118Z",
  captured_at: null,
  snapshot_url: `${SNAPSHOTS}/snap_4Hn7tRb2XcV9mKq1LsZe8W/`,
  warc_url: `${API}/snapshots/snap_4Hn7tRb2XcV9mKq1LsZe8W/warc`
}

const domain: typeof Domain.Encoded = {
  id: "dom_8Kc3Wq5ZrN1tYb7XmPa2Lf",
  hostname: "go.example.org",
  state: "pending",
  verification: {
    method: "dns_txt",
    record_name: "_shortlinks-challenge.go.example.org",
    record_value: "7Tq2ZkXw9bVn4RmL1cYs8PdF0hJ6uGa3"
  },
  last_error: null,
  last_checked_at: null,
  verified_at: null,
  created_at: "2026-03-02T12:00:00.000Z",
  updated_at: "2026-03-02T12:00:00.000Z"
}

const usage: typeof AccountUsage.Encoded = {
  plan: "standard",
  links: { used: 412, limit: 10_000 },
  images: {
    uploads: { used: 37, limit: 1_000 },
    storage_bytes: { used: 52_428_800, limit: 5_368_709_120, total_used: 60_817_408, unmetered_used: 8_388_608 }
  },
  domains: { used: 1, limit: 3 },
  snapshots: { used: 5, limit: 100 }
}

const one = (summary: string, data: unknown): Examples => ({ ok: { summary, value: { data, meta } } })
/** An error body in the contract's shape. */
const error = (summary: string, code: string, message: string, detail?: string): Examples => ({
  [code]: {
    summary,
    value: { error: { code, message, request_id: meta.request_id, ...(detail === undefined ? {} : { detail }) } }
  }
})
const uploadCurl = (form: string) =>
  `curl -X POST '${API}/images${form === "" ? "?content_rating=general" : ""}' -H 'Authorization: Bearer $API_KEY' -H 'Idempotency-Key: 3f1c9a7e-upload-0001' ${form}`

/** By operation id (`group.endpoint`, as the document names operations). */
export const OPERATION_EXAMPLES: Readonly<Record<string, OperationExamples>> = {
  "links.create": {
    request: {
      "application/json": {
        random: { summary: "A random 7-character slug", value: { url: randomLink.destination_url } },
        custom: { summary: "A custom slug", value: { url: link.destination_url, custom_slug: link.slug } }
      }
    },
    responses: {
      201: one("The new link", link),
      400: error(
        "A custom_slug that breaks the rule",
        "invalid_request",
        "The request body is invalid.",
        "custom_slug: must match ^[A-Za-z0-9_-]{4,32}$"
      ),
      409: error("The slug is in use", "slug_taken", "This slug is already taken.", "custom_slug: spring-sale")
    }
  },
  "links.get": {
    responses: {
      200: one("A link", link),
      404: error("Not this account's link (or no such link)", "not_found", "No such link.")
    }
  },
  "links.list": {
    responses: {
      200: {
        page: {
          summary: "A page of two links, and the cursor of the next page",
          value: { data: [link, randomLink], meta: { ...meta, next_cursor: "djE6MTIzNDU" } }
        }
      }
    }
  },
  "analytics.get": {
    responses: { 200: one("Three days, every breakdown (values under 5 clicks folded into `other`)", analytics) }
  },
  "images.upload": {
    request: {
      "multipart/form-data": {
        multipart: {
          summary: "A file as the part `file`, with the rating as a form field",
          description: `\`${uploadCurl("-F 'file=@photo.jpg;type=image/jpeg' -F content_rating=general")}\``,
          value: { file: "(the bytes of photo.jpg)", content_rating: "general" }
        }
      },
      ...Object.fromEntries(
        ["image/jpeg", "image/png", "image/webp", "image/gif"].map((type) => [
          type,
          {
            raw: {
              summary: "The file's bytes as the body, the rating in the query",
              description: `\`${uploadCurl(`-H 'Content-Type: ${type}' --data-binary @photo.${type.slice(6)}`)}\``
            }
          }
        ])
      )
    },
    responses: {
      202: one("Accepted: poll status_url until status is ready", processingImage),
      415: error(
        "Bytes that are not a JPEG, PNG, WebP or GIF",
        "unsupported_media_type",
        "The file is not a supported image.",
        "file: the bytes are not JPEG, PNG, WebP or GIF"
      )
    }
  },
  "images.get": {
    responses: {
      200: {
        ready: { summary: "Ready and rated", value: { data: readyImage, meta } },
        processing: { summary: "Still processing: no rating yet", value: { data: processingImage, meta } }
      }
    }
  },
  "snapshots.create": {
    request: { "application/json": { page: { summary: "A public page", value: { url: snapshot.url } } } },
    responses: { 202: one("Queued for capture", snapshot) }
  },
  "domains.register": {
    request: { "application/json": { host: { summary: "A host of yours", value: { hostname: domain.hostname } } } },
    responses: { 201: one("Pending: publish the TXT record, then POST /domains/{id}/verify", domain) }
  },
  "usage.get": {
    responses: {
      200: one("An ordinary key on the standard plan", usage),
      401: error("No valid key", "unauthenticated", "A valid API key is required.")
    }
  }
}
