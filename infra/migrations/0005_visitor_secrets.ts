import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// Filled in by the work on this migration.
export default Effect.gen(function* () {
  yield* SqlClient.SqlClient
})
