import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.js"
import { mapDomainErrors } from "../DomainAnswers.js"
import { CurrentPrincipal } from "../middleware/Authentication.js"
import { IdempotentOperations, withIdempotency } from "../middleware/Idempotency.js"
import { envelope, keysetPage } from "../Shared.js"
import { toApiSnapshot } from "./Api.js"
import { Snapshots } from "./Snapshots.js"

export const SnapshotsHttp = HttpApiBuilder.group(Api, "snapshots", (handlers) =>
  Effect.gen(function* () {
    const operations = yield* IdempotentOperations
    const snapshots = yield* Snapshots
    const toApi = toApiSnapshot(snapshots.snapshotHost, snapshots.apiBase)

    return withIdempotency(
      operations,
      handlers
        .handle("create", ({ payload }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => snapshots.create(p, payload.url)),
            Effect.flatMap((s) => envelope(toApi(s))),
            mapDomainErrors
          )
        )
        .handle("list", ({ urlParams }) =>
          Effect.flatMap(CurrentPrincipal, (p) =>
            keysetPage(
              urlParams,
              (afterSeq: bigint | undefined, limit: number) => snapshots.list(p, { afterSeq, limit }),
              toApi
            )
          )
        )
        .handle("get", ({ path }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => snapshots.get(p, path.id)),
            Effect.flatMap((s) => envelope(toApi(s))),
            mapDomainErrors
          )
        )
        .handle("warc", ({ path }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => snapshots.warc(p, path.id)),
            Effect.map(({ snapshot, bytes }) =>
              HttpServerResponse.uint8Array(bytes, {
                contentType: "application/warc",
                headers: {
                  "content-disposition": `attachment; filename="${snapshot.id}.warc"`,
                  "cache-control": "private, max-age=3600"
                }
              })
            ),
            mapDomainErrors
          )
        )
    )
  })
)
