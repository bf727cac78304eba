import { PgClient } from "@effect/sql-pg"
import { Effect, Layer } from "effect"
import { AbuseReportRepo } from "../../domain/ports/AbuseReportRepo.js"
import { newId } from "../Ids.js"

const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient

  const file = (imageId: string, reason: string) =>
    Effect.gen(function* () {
      const id = newId("rpt")
      yield* sql`INSERT INTO abuse_reports (id, image_id, reason) VALUES (${id}, ${imageId}, ${reason})`.pipe(
        Effect.orDie
      )
      return id
    })

  const open = () =>
    sql<{ id: string; image_id: string; reason: string; created_at: Date }>`
      SELECT id, image_id, reason, created_at FROM abuse_reports WHERE status = 'open' ORDER BY created_at`.pipe(
      Effect.orDie
    )

  return AbuseReportRepo.of({ file, open })
})

export const AbuseReportRepoLive: Layer.Layer<AbuseReportRepo, never, PgClient.PgClient> = Layer.effect(
  AbuseReportRepo,
  make
)
