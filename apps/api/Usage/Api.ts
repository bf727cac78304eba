import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../middleware/Authentication.js"
import { Envelope } from "../Shared.js"

const Count = Schema.Int.annotations({ jsonSchema: { type: "integer", minimum: 0 } })
const limit = (description: string) =>
  Schema.NullOr(Count).annotations({ description: `${description} null for an Unmetered Partner Key.` })

const Quota = (identifier: string, used: string, limitDescription: string) =>
  Schema.Struct({
    used: Count.annotations({ description: used }),
    limit: limit(limitDescription)
  }).annotations({ identifier })

export const StorageUsage = Schema.Struct({
  used: Count.annotations({
    description:
      "Stored image bytes counted against this key's limit, pending upload reservations included. For an ordinary key, the account's ordinary (non-Partner) images only; for an Unmetered Partner Key, the account total."
  }),
  limit: limit("The plan's storage_bytes."),
  total_used: Count.annotations({
    description: "All stored image bytes of the account, ordinary and Partner, pending reservations included."
  }),
  unmetered_used: Count.annotations({
    description: "Bytes of images uploaded with Unmetered Partner Keys (pending reservations included)."
  })
}).annotations({ identifier: "StorageUsage" })

export const AccountUsage = Schema.Struct({
  plan: Schema.String.annotations({ description: "The account's plan." }),
  links: Quota(
    "LinkUsage",
    "Links created this calendar month (UTC), by every key of the account.",
    "The plan's links_per_month."
  ),
  images: Schema.Struct({
    uploads: Quota(
      "ImageUploadUsage",
      "Image uploads and URL imports this calendar month (UTC), by every key of the account.",
      "The plan's image_uploads_per_month."
    ),
    storage_bytes: StorageUsage
  }).annotations({ identifier: "ImageUsage" }),
  domains: Quota(
    "DomainUsage",
    "Custom domains registered and not disabled (pending and verified).",
    "The plan's custom_domains."
  ),
  snapshots: Quota(
    "SnapshotUsage",
    "Snapshots requested this calendar month (UTC), by every key of the account.",
    "The plan's snapshots_per_month."
  )
}).annotations({
  identifier: "Usage",
  description:
    "The account's plan and how much of it is used. Limits are those that apply to the calling key: every limit is null for an Unmetered Partner Key. Monthly figures reset at the start of each calendar month (UTC); deleting an image frees its bytes at once."
})

export class UsageApi extends HttpApiGroup.make("usage")
  .add(
    HttpApiEndpoint.get("get", "/usage")
      .addSuccess(Envelope(AccountUsage))
      .annotate(OpenApi.Summary, "Read the account's plan and quota usage (any valid key; no scope needed)")
  )
  .middlewareEndpoints(Authentication) {}
