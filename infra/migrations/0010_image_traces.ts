import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The W3C `traceparent` of the request that uploaded an image, when traces are exported
 * (OTEL_EXPORTER_OTLP_ENDPOINT): its conversion job and its rating continue that trace. On
 * the image rather than on its job row, which goes when the conversion ends, before the
 * rating. Null when tracing is off.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`ALTER TABLE images ADD COLUMN traceparent text`)
})
