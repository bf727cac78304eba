import { Context, Effect, FiberRef, Schema } from "effect"
import * as E from "./Errors.js"

export const Meta = Schema.Struct({ request_id: Schema.String }).annotations({ identifier: "Meta" })
export const PageMeta = Schema.Struct({
  request_id: Schema.String,
  next_cursor: Schema.NullOr(Schema.String).annotations({
    description: "Pass as `cursor` for the next page; null on the last page."
  })
}).annotations({ identifier: "PageMeta" })

/** The success envelope: the resource in `data`, the request id in `meta`. */
export const Envelope = <S extends Schema.Schema.Any>(data: S) => Schema.Struct({ data, meta: Meta })
export const Page = <S extends Schema.Schema.Any>(item: S) =>
  Schema.Struct({ data: Schema.Array(item), meta: PageMeta })

export const envelope = <A>(data: A) =>
  Effect.map(FiberRef.get(E.CurrentRequestId), (request_id) => ({ data, meta: { request_id } }))
export const page = <A>(data: ReadonlyArray<A>, next_cursor: string | null) =>
  Effect.map(FiberRef.get(E.CurrentRequestId), (request_id) => ({ data, meta: { request_id, next_cursor } }))

/** Absent or present, never `undefined`: so a wrong value is reported once, not also as "Expected undefined". */
export const optional = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

/** A decimal integer in a query string: not "1e1", "0x10", " 5" or "", which Number() would take. */
export const intFromString = (min: number, max: number) => {
  const message = () => `must be an integer from ${min} to ${max}`
  return Schema.String.pipe(
    Schema.pattern(/^-?\d{1,10}$/, { message }),
    Schema.compose(Schema.NumberFromString),
    Schema.int({ message }),
    Schema.between(min, max, { message })
  )
}

/** The `limit` query parameter of every collection. */
export const Limit = intFromString(1, 100).annotations({
  description: "Page size, 1 to 100 (default 50).",
  jsonSchema: { type: "integer", minimum: 1, maximum: 100, default: 50 }
})

/** The `cursor` query parameter of every collection; checked by `keysetPage`. */
export const Cursor = Schema.String.annotations({
  description: "Opaque; from meta.next_cursor of the previous page. Empty or absent: the first page."
})

/** A JSON value, as the OpenAPI document is built from (in place, so mutable). */
export type Json = null | boolean | number | string | Array<Json> | JsonObject
export interface JsonObject {
  [key: string]: Json | undefined
}

/**
 * What the OpenAPI document says about an endpoint's success response beyond what HttpApi
 * expresses: more media types (HttpApi documents one per status) and response headers
 * (name -> description; each always present).
 */
export class SuccessDoc extends Context.Tag("SuccessDoc")<
  SuccessDoc,
  {
    readonly content?: Readonly<Record<string, { readonly schema: JsonObject }>>
    readonly headers?: Readonly<Record<string, string>>
  }
>() {}

/** The `{id}` path of a resource: any string; one that names nothing of the caller's is 404. */
export const IdPath = Schema.Struct({ id: Schema.String })

const MAX_SEQ = 9223372036854775807n

/** Opaque page cursors: the keyset position, base64url-encoded. */
export const encodeCursor = (seq: bigint): string => Buffer.from(`v1:${seq}`).toString("base64url")
export const decodeCursor = (cursor: string): bigint | undefined => {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(cursor)) return undefined
  const m = /^v1:(\d{1,19})$/.exec(Buffer.from(cursor, "base64url").toString())
  if (!m) return undefined
  // Positions are bigint (PostgreSQL's int8): a forged larger one is malformed, not a query error.
  const seq = BigInt(m[1]!)
  return seq <= MAX_SEQ ? seq : undefined
}

/**
 * One page of a keyset-paged collection, newest first: decodes the cursor (400 when it is
 * not one of ours), fetches one row more than asked to learn whether a next page exists.
 */
export const keysetPage = <Row extends { readonly seq: bigint }, A, R>(
  params: { readonly cursor?: string | undefined; readonly limit?: number | undefined },
  fetch: (afterSeq: bigint | undefined, limit: number) => Effect.Effect<ReadonlyArray<Row>, never, R>,
  toApi: (row: Row) => A
) =>
  Effect.gen(function* () {
    let afterSeq: bigint | undefined
    // An empty `cursor=` (a client that always sends the parameter) is the first page.
    if (params.cursor !== undefined && params.cursor !== "") {
      afterSeq = decodeCursor(params.cursor)
      if (afterSeq === undefined) {
        return yield* E.fail(
          E.InvalidRequest,
          "The cursor is malformed.",
          "cursor: must be a value of meta.next_cursor"
        )
      }
    }
    const limit = params.limit ?? 50
    const rows = yield* fetch(afterSeq, limit + 1)
    const pageRows = rows.slice(0, limit)
    const next = rows.length > limit ? encodeCursor(pageRows.at(-1)!.seq) : null
    return yield* page(pageRows.map(toApi), next)
  })
