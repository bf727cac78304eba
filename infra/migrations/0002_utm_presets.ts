import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`
    CREATE TABLE utm_presets (
      seq bigserial UNIQUE,
      id text PRIMARY KEY,
      account_id text NOT NULL REFERENCES accounts(id),
      name text NOT NULL,
      utm jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (account_id, name)
    );
    CREATE INDEX utm_presets_account_seq ON utm_presets(account_id, seq DESC);
  `)
})
