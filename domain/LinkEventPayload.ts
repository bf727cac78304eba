import { Schema, Struct } from "effect"
import { LinkEventData } from "./Events.js"
import { Link } from "./Link.js"

/** The model without its owner, who is the envelope's `account_id`: what a link event's data holds. */
const LinkWithoutOwner = Schema.Struct(Struct.omit(Link.fields, "accountId"))

/**
 * A link event's data as a transformation of the model: encoding a Link gives LinkEventData
 * (how Links makes every link event, through Outbox.appendEvent); decoding LinkEventData gives
 * the link's fields back, all but its owner.
 */
export const LinkEventPayload = Schema.transform(LinkEventData, LinkWithoutOwner, {
  strict: true,
  decode: (data) => ({
    id: data.id,
    slug: data.slug,
    destinationUrl: data.destination_url,
    status: data.publication_status,
    utm: data.utm,
    expiresAt: data.expires_at === null ? null : new Date(data.expires_at),
    createdAt: new Date(data.created_at),
    updatedAt: new Date(data.updated_at)
  }),
  encode: (link) => ({
    id: link.id,
    slug: link.slug,
    destination_url: link.destinationUrl,
    publication_status: link.status,
    utm: link.utm,
    expires_at: link.expiresAt?.toISOString() ?? null,
    created_at: link.createdAt.toISOString(),
    updated_at: link.updatedAt.toISOString()
  })
})
