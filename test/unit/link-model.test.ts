import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Schema } from "effect"
import { toApiLink } from "../../apps/api/Links/Api.js"
import { AccountId } from "../../domain/Account.js"
import { LinkEvent, LinkEventData } from "../../domain/Events.js"
import { ImageId } from "../../domain/Image.js"
import { isLinkId, Link, LinkId } from "../../domain/Link.js"
import { LinkEventPayload } from "../../domain/LinkEventPayload.js"
import { Outbox } from "../../domain/ports/Outbox.js"
import { memoryPorts } from "../support/memoryPorts.js"

const link = new Link({
  id: LinkId.make("link_7kQ2pX9vLm3nR8sT1wY4zA"),
  accountId: AccountId.make("acct_3fG7hJ2kL9mN4pQ8rS1tV6"),
  slug: "launch",
  destinationUrl: "https://example.com/",
  status: "active",
  utm: { utm_source: "news" },
  expiresAt: new Date("2025-04-01T00:00:00.000Z"),
  createdAt: new Date("2025-03-10T12:00:00.000Z"),
  updatedAt: new Date("2025-03-10T12:30:00.123Z")
})

describe("the Link model", () => {
  it("ids are branded by their shape: link_ or acct_ and 1 to 64 base62 characters; image ids by IMAGE_ID_PATTERN", () => {
    expect(isLinkId("link_abc")).toBe(true)
    for (const id of ["link_", "link_a-b", "link_\u0000", `link_${"a".repeat(65)}`, "acct_abc"]) {
      expect(isLinkId(id), id).toBe(false)
    }
    expect(Schema.is(AccountId)("acct_3fG7hJ2kL9mN4pQ8rS1tV6")).toBe(true)
    expect(Schema.is(AccountId)("link_3fG7hJ2kL9mN4pQ8rS1tV6")).toBe(false)
    expect(() => LinkId.make("nope")).toThrow()
    expect(Schema.is(ImageId)("aB3dE5g")).toBe(true)
    expect(Schema.is(ImageId)("short")).toBe(false)
  })

  it("a link event's data is the model encoded by LinkEventPayload, and decodes back to it but its owner", () => {
    const data = Schema.encodeSync(LinkEventPayload)(link)
    expect(data).toStrictEqual({
      id: "link_7kQ2pX9vLm3nR8sT1wY4zA",
      slug: "launch",
      destination_url: "https://example.com/",
      publication_status: "active",
      utm: { utm_source: "news" },
      expires_at: "2025-04-01T00:00:00.000Z",
      created_at: "2025-03-10T12:00:00.000Z",
      updated_at: "2025-03-10T12:30:00.123Z"
    })
    expect(Schema.is(LinkEventData)(data)).toBe(true)
    const { accountId: _, ...withoutOwner } = link
    expect(Schema.decodeUnknownSync(LinkEventPayload)(data)).toStrictEqual(withoutOwner)
  })

  it("the API record is the model under the contract's names, with its short URLs", () => {
    expect(toApiLink("http://sho.rt")(link)).toStrictEqual({
      id: "link_7kQ2pX9vLm3nR8sT1wY4zA",
      slug: "launch",
      short_url: "http://sho.rt/launch",
      destination_url: "https://example.com/",
      publication_status: "active",
      created_at: "2025-03-10T12:00:00.000Z",
      updated_at: "2025-03-10T12:30:00.123Z",
      expires_at: "2025-04-01T00:00:00.000Z",
      utm: { utm_source: "news" },
      short_urls: ["http://sho.rt/launch"]
    })
  })

  it.effect("appendEvent stores the data as the schema encodes it; data the schema refuses is a defect", () => {
    const { state, layer } = memoryPorts()
    return Effect.gen(function* () {
      const outbox = yield* Outbox
      const event = yield* outbox.appendEvent(
        LinkEventPayload,
        "links.v1",
        link.id,
        "link.updated",
        link.accountId,
        link
      )
      expect(Schema.is(LinkEvent)(event)).toBe(true)
      expect(state.events[0]?.data).toStrictEqual(Schema.encodeSync(LinkEventPayload)(link))
      const invalid = { ...link, utm: { utm_source: "" } }
      const exit = yield* Effect.exit(
        outbox.appendEvent(LinkEventPayload, "links.v1", link.id, "link.updated", link.accountId, invalid)
      )
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
      expect(state.events).toHaveLength(1)
    }).pipe(Effect.provide(layer))
  })
})
