import { describe, expect, it } from "vitest"
import type { LinkSnapshot } from "../../domain/ports/LinkRepo.js"
import { SnapshotReader } from "../../infra/postgres/LinkSnapshots.js"

/** PostgreSQL's binary COPY format, written out field by field as the server sends it. */
const header = (extension = Buffer.alloc(0)) => {
  const b = Buffer.alloc(19 + extension.length)
  b.write("PGCOPY\n\xff\r\n\0", 0, "latin1")
  b.writeInt32BE(0, 11)
  b.writeUInt32BE(extension.length, 15)
  extension.copy(b, 19)
  return b
}
const field = (value: Buffer | null) => {
  const length = Buffer.alloc(4)
  length.writeInt32BE(value === null ? -1 : value.length)
  return value === null ? length : Buffer.concat([length, value])
}
const text = (s: string | null) => field(s === null ? null : Buffer.from(s, "utf8"))
const float8 = (n: number | null) => {
  if (n === null) return field(null)
  const b = Buffer.alloc(8)
  b.writeDoubleBE(n)
  return field(b)
}
const row = (s: LinkSnapshot, fields = 8) => {
  const count = Buffer.alloc(2)
  count.writeInt16BE(fields)
  return Buffer.concat([
    count,
    text(s.id),
    text(s.accountId),
    text(s.slug),
    text(s.destinationUrl),
    field(Buffer.from([s.active ? 1 : 0])),
    text(s.utm === null ? null : JSON.stringify(s.utm)),
    float8(s.expiresAt),
    float8(s.updatedAt)
  ])
}
const TRAILER = Buffer.from([0xff, 0xff])

const links: Array<LinkSnapshot> = [
  {
    id: "lnk_1",
    accountId: "acc_1",
    slug: "abc",
    destinationUrl: "https://example.com/a",
    active: true,
    utm: null,
    expiresAt: null,
    updatedAt: 1_700_000_000_123
  },
  {
    id: "lnk_2",
    accountId: "acc_2",
    slug: "déjà",
    destinationUrl: "https://example.com/p?x=1",
    active: false,
    utm: { utm_source: "news", utm_medium: "e\tmail" },
    expiresAt: 1_800_000_000_000,
    updatedAt: 1_700_000_000_456
  }
]

const readAll = (chunks: ReadonlyArray<Buffer>) => {
  const reader = new SnapshotReader()
  const out: Array<LinkSnapshot> = []
  for (const chunk of chunks) reader.push(chunk, out)
  reader.finish()
  return out
}

describe("the redirector's load reads PostgreSQL's binary COPY of the links", () => {
  const whole = Buffer.concat([header(), row(links[0]!), row(links[1]!), TRAILER])

  it("gives each row's fields, NULLs as null, utm parsed and the times as numbers", () => {
    expect(readAll([whole])).toStrictEqual(links)
  })

  it("reads the same rows however the stream is cut into chunks, down to single bytes", () => {
    for (let cut = 1; cut < whole.length; cut++) {
      expect(readAll([whole.subarray(0, cut), whole.subarray(cut)])).toStrictEqual(links)
    }
    const bytes = [...whole].map((b) => Buffer.from([b]))
    expect(readAll(bytes)).toStrictEqual(links)
  })

  it("skips a header extension", () => {
    expect(readAll([Buffer.concat([header(Buffer.from("ext!")), row(links[0]!), TRAILER])])).toStrictEqual([links[0]])
  })

  it("refuses a stream without the signature, a row of other columns, bytes after the trailer, and an end before the trailer", () => {
    const bad = Buffer.from(whole)
    bad[0] = 0x51
    expect(() => readAll([bad])).toThrow(/signature/)
    expect(() => readAll([Buffer.concat([header(), row(links[0]!, 7)])])).toThrow(/7 fields/)
    expect(() => readAll([Buffer.concat([whole, Buffer.from([0])])])).toThrow(/after the trailer/)
    expect(() => readAll([whole.subarray(0, whole.length - 2)])).toThrow(/before its trailer/)
    const noId = Buffer.concat([header(), row({ ...links[0]!, id: null as unknown as string }), TRAILER])
    expect(() => readAll([noId])).toThrow(/NULL/)
  })
})
