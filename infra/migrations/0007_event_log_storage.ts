import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Event values are stored out of line without compression. Click batches are ~150 KB of
 * JSON each: compressing them (pglz) on every append and decompressing on every read cost
 * PostgreSQL more CPU than the rest of the append, for disk space the log gives back
 * after its retention anyway. Applies to rows written from now on.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`ALTER TABLE event_log ALTER COLUMN value SET STORAGE EXTERNAL`)
})
