import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`
    CREATE TABLE domains (
      seq bigserial UNIQUE,
      id text PRIMARY KEY,
      account_id text NOT NULL REFERENCES accounts(id),
      hostname text NOT NULL,
      state text NOT NULL CHECK (state IN ('pending', 'verified', 'disabled')),
      token text NOT NULL,
      last_error text,
      last_checked_at timestamptz,
      verified_at timestamptz,
      proof_missing_since timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    );
    -- One live registration per hostname, whichever account: disabled ones free it.
    CREATE UNIQUE INDEX domains_live_hostname ON domains(hostname) WHERE state <> 'disabled';
    CREATE INDEX domains_account_seq ON domains(account_id, seq DESC);
    CREATE INDEX domains_recheck ON domains(last_checked_at) WHERE state = 'verified';
  `)
})
