import { Chunk, Stream } from "effect"
import type { Link } from "./Api.js"

/** The columns of GET /links.csv, in order. */
export const LINK_CSV_COLUMNS = [
  "id",
  "slug",
  "short_url",
  "destination_url",
  "publication_status",
  "created_at",
  "updated_at",
  "expires_at"
] as const

/** One RFC 4180 field: quoted when it holds a quote, a comma or a line break. */
export const csvField = (value: string) => (/[",\r\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value)

/** The CSV document of the links: a header row, then one CRLF-terminated row per link, as UTF-8. */
export const linksCsv = <E, R>(links: Stream.Stream<Link, E, R>): Stream.Stream<Uint8Array, E, R> =>
  links.pipe(
    Stream.map((l) => `${LINK_CSV_COLUMNS.map((c) => csvField(String(l[c] ?? ""))).join(",")}\r\n`),
    Stream.prepend(Chunk.of(`${LINK_CSV_COLUMNS.join(",")}\r\n`)),
    Stream.encodeText
  )
