import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The daily secret of the click visitor hash, shared by every redirector instance. It lives
 * here, never beside the analytics data, and rows older than yesterday are deleted, so a
 * past day's hashes cannot be recomputed from addresses and user agents.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`
    CREATE TABLE visitor_secrets (
      day date PRIMARY KEY,
      secret bytea NOT NULL CHECK (octet_length(secret) >= 32),
      created_at timestamptz NOT NULL DEFAULT now()
    );
  `)
})
