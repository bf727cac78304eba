import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { DestinationUrl } from "../../../domain/Link.js"
import {
  CaptureStatus,
  PublicationStatus,
  SNAPSHOT_BUDGET,
  type Snapshot as SnapshotModel,
  snapshotPagePath
} from "../../../domain/Snapshot.js"
import * as E from "../Errors.js"
import { Authentication } from "../middleware/Authentication.js"
import { IdempotencyKey } from "../middleware/Idempotency.js"
import { JsonBody } from "../middleware/JsonBody.js"
import { RequiredScope } from "../middleware/Scopes.js"
import { Cursor, Envelope, IdPath, Limit, optional, Page, SuccessDoc } from "../Shared.js"

const uri = (description: string) =>
  Schema.String.annotations({ description, jsonSchema: { type: "string", format: "uri", description } })
const nullable = <S extends Schema.Schema.Any>(s: S, description: string) =>
  Schema.NullOr(s).annotations({ description })
const instant = Schema.String.annotations({ jsonSchema: { type: "string", format: "date-time" } })

/** The API record of a snapshot: the model (domain/Snapshot.ts) under the contract's names. */
export const Snapshot = Schema.Struct({
  id: Schema.String.annotations({ description: "Snapshot identifier; begins with snap_." }),
  url: uri("The URL asked for."),
  final_url: nullable(Schema.String, "The URL that answered, after safe redirects; null until captured."),
  http_status: nullable(Schema.Number, "The page's HTTP status; null until captured."),
  title: nullable(Schema.String, "The page's <title>; null until captured or when it has none."),
  content_type: nullable(Schema.String, "The page's Content-Type; null until captured."),
  bytes: nullable(Schema.Number, "The page's size as fetched; null until captured."),
  sha256: nullable(Schema.String, "SHA-256 (hex) of the page as fetched; null until captured."),
  resources: Schema.Struct({
    count: Schema.Number.annotations({ description: "Sub-resources stored (stylesheets, images, fonts, icons)." }),
    bytes: Schema.Number.annotations({ description: "Their bytes together." })
  }),
  capture_status: CaptureStatus,
  publication_status: PublicationStatus,
  failure: nullable(Schema.String, "Why the capture failed, when capture_status is failed."),
  created_at: instant,
  captured_at: Schema.NullOr(instant),
  snapshot_url: uri(
    "Where anyone reads the snapshot once published, on the snapshot host ({snapshot_host}/{id}/); 404 while unpublished or once withdrawn."
  ),
  warc_url: uri("The capture as WARC/1.1 (scope snapshots:read) once captured.")
}).annotations({ identifier: "Snapshot" })

export const toApiSnapshot =
  (snapshotHost: string, apiBase: string) =>
  (s: SnapshotModel): typeof Snapshot.Type => ({
    id: s.id,
    url: s.url,
    final_url: s.finalUrl,
    http_status: s.httpStatus,
    title: s.title,
    content_type: s.contentType,
    bytes: s.bytes,
    sha256: s.sha256,
    resources: { count: s.resourceCount, bytes: s.resourceBytes },
    capture_status: s.captureStatus,
    publication_status: s.publicationStatus,
    failure: s.failure,
    created_at: s.createdAt.toISOString(),
    captured_at: s.capturedAt?.toISOString() ?? null,
    snapshot_url: `${snapshotHost}${snapshotPagePath(s.id)}`,
    warc_url: `${apiBase}/snapshots/${s.id}/warc`
  })

export const CreateSnapshot = Schema.Struct({
  url: DestinationUrl
}).annotations({ identifier: "CreateSnapshot", parseOptions: { onExcessProperty: "error", errors: "all" } })

export const ListSnapshotsParams = Schema.Struct({ cursor: optional(Cursor), limit: optional(Limit) })

const BUDGET = `at most ${SNAPSHOT_BUDGET.maxPageBytes} bytes of HTML, ${SNAPSHOT_BUDGET.maxResources} sub-resources and ${SNAPSHOT_BUDGET.maxResourceBytes} bytes of them in total, ${SNAPSHOT_BUDGET.resourceTimeoutMs / 1000} s per resource`

const scope = RequiredScope

export class SnapshotsApi extends HttpApiGroup.make("snapshots")
  .add(
    HttpApiEndpoint.post("create", "/snapshots")
      .setPayload(CreateSnapshot)
      .addSuccess(Envelope(Snapshot), { status: 202 })
      .addError(E.UrlNotAllowed)
      .addError(E.QuotaExceeded)
      .annotate(scope, "snapshots:write")
      .annotate(OpenApi.Summary, "Request an immutable Snapshot of a public web page")
      .annotate(
        OpenApi.Description,
        `Answers 202 with capture_status queued. The scheme, credentials and literal private addresses are refused at once (422 url_not_allowed); name resolution and fetching happen at capture time, and failures there end in capture_status failed with a failure reason. A capture fetches the page and its stylesheets, images, fonts and icons (never scripts, frames or media) through the SSRF-safe fetcher, within a budget: ${BUDGET}.`
      )
      .middleware(JsonBody)
      .middleware(IdempotencyKey)
  )
  .add(
    HttpApiEndpoint.get("list", "/snapshots")
      .setUrlParams(ListSnapshotsParams)
      .addSuccess(Page(Snapshot))
      .addError(E.InvalidRequest)
      .annotate(scope, "snapshots:read")
      .annotate(OpenApi.Summary, "List Snapshots, newest first")
  )
  .add(
    HttpApiEndpoint.get("get", "/snapshots/:id")
      .setPath(IdPath)
      .addSuccess(Envelope(Snapshot))
      .addError(E.NotFound)
      .annotate(scope, "snapshots:read")
      .annotate(OpenApi.Summary, "Read a Snapshot's capture and publication status")
  )
  .add(
    HttpApiEndpoint.get("warc", "/snapshots/:id/warc")
      .setPath(IdPath)
      .addSuccess(
        HttpApiSchema.Uint8Array({ contentType: "application/warc" }).annotations({
          description:
            "WARC/1.1, uncompressed: a warcinfo record, then a request and a response record for the page and each stored resource (WARC-Target-URI, WARC-Date, WARC-Payload-Digest in sha256)."
        })
      )
      .addError(E.NotFound)
      .annotate(scope, "snapshots:read")
      .annotate(SuccessDoc, { headers: { "Content-Disposition": 'Always `attachment; filename="<id>.warc"`.' } })
      .annotate(OpenApi.Summary, "Download a captured Snapshot as WARC/1.1 (404 until captured)")
  )
  .middlewareEndpoints(Authentication) {}
