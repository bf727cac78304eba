import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import { isTracing } from "../Tracing.js"

/**
 * The trace an image's conversion and rating continue: the W3C `traceparent` stored with the
 * image by the upload (images.traceparent). Null when the upload was not traced; not even
 * read while this process does not trace. Without the layer: always null.
 */
export class ImageTraces extends Context.Reference<ImageTraces>()("ImageTraces", {
  defaultValue: () => ({ of: (_imageId: string): Effect.Effect<string | null> => Effect.succeed(null) })
}) {}

export const ImageTracesLive = Layer.effect(
  ImageTraces,
  Effect.map(PgClient.PgClient, (sql) => ({
    of: (imageId: string) =>
      Effect.flatMap(isTracing, (on) =>
        on
          ? sql<{ traceparent: string | null }>`SELECT traceparent FROM images WHERE id = ${imageId}`.pipe(
              Effect.map((rows) => rows[0]?.traceparent ?? null),
              // Only a trace is lost: the job goes on.
              Effect.orElseSucceed(() => null),
              Effect.withTracerEnabled(false)
            )
          : Effect.succeed(null)
      )
  }))
)
