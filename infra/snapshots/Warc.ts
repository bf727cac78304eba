import { WARCRecord, WARCSerializer } from "warcio"
import type { Manifest, ManifestEntry } from "../../domain/Snapshot.js"

const DIGEST = { algo: "sha-256", prefix: "sha256:", base32: false } as const
const STATUS_TEXT: Readonly<Record<number, string>> = { 200: "OK", 203: "Non-Authoritative Information" }

const serialize = (record: WARCRecord) => WARCSerializer.serialize(record, { gzip: false, digest: DIGEST })

/** The request that fetched an entry, as the fetcher sent it. */
const requestRecord = (entry: ManifestEntry, date: string) => {
  const url = new URL(entry.finalUrl)
  return WARCRecord.create(
    {
      url: entry.finalUrl,
      date,
      type: "request",
      warcVersion: "WARC/1.1",
      statusline: `GET ${url.pathname}${url.search} HTTP/1.1`,
      httpHeaders: {
        Host: url.host,
        Accept: "*/*",
        "Accept-Encoding": "identity",
        "User-Agent": "shortlinks-fetcher/1.0"
      }
    },
    []
  )
}

/** The response as fetched: its status, its kept headers and its bytes exactly. */
const responseRecord = (entry: ManifestEntry, date: string, body: Uint8Array) => {
  const headers: Record<string, string> = { ...entry.headers, "content-type": entry.contentType }
  headers["content-length"] = String(body.length)
  return WARCRecord.create(
    {
      url: entry.finalUrl,
      date,
      type: "response",
      warcVersion: "WARC/1.1",
      statusline: `HTTP/1.1 ${entry.status} ${STATUS_TEXT[entry.status] ?? ""}`.trimEnd(),
      httpHeaders: headers
    },
    [body]
  )
}

/**
 * A capture as WARC/1.1 (uncompressed): a warcinfo record, then a request and a response
 * record for the page and for every resource, with WARC-Target-URI, WARC-Date (the capture
 * time) and WARC-Payload-Digest / WARC-Block-Digest in sha256. `body` gives the stored bytes
 * of an entry (as fetched, never the rewritten copy).
 */
export const buildWarc = async (
  manifest: Manifest,
  body: (entry: ManifestEntry) => Promise<Uint8Array>,
  filename: string
): Promise<Uint8Array> => {
  const date = manifest.capturedAt
  const parts: Array<Uint8Array> = [
    await serialize(
      WARCRecord.createWARCInfo(
        { filename, warcVersion: "WARC/1.1", date },
        { software: "shortlinks snapshots", format: "WARC File Format 1.1", "original-url": manifest.page.url }
      )
    )
  ]
  for (const entry of [manifest.page, ...manifest.resources]) {
    parts.push(await serialize(requestRecord(entry, date)))
    parts.push(await serialize(responseRecord(entry, date, await body(entry))))
  }
  return Buffer.concat(parts)
}
