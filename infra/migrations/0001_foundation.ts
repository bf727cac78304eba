import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`
    CREATE TABLE accounts (
      id text PRIMARY KEY,
      name text NOT NULL,
      plan text NOT NULL DEFAULT 'free',
      created_at timestamptz NOT NULL DEFAULT now()
    );

    CREATE TABLE api_keys (
      id text PRIMARY KEY,
      account_id text NOT NULL REFERENCES accounts(id),
      secret_hash bytea NOT NULL UNIQUE,
      scopes text[] NOT NULL,
      unmetered boolean NOT NULL DEFAULT false,
      created_at timestamptz NOT NULL DEFAULT now(),
      revoked_at timestamptz
    );
    CREATE INDEX api_keys_account ON api_keys(account_id);

    CREATE TABLE links (
      seq bigserial UNIQUE,
      id text PRIMARY KEY,
      account_id text NOT NULL REFERENCES accounts(id),
      slug text NOT NULL UNIQUE,
      destination_url text NOT NULL,
      status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
      utm jsonb,
      expires_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX links_account_seq ON links(account_id, seq DESC);

    CREATE TABLE idempotency_records (
      account_id text NOT NULL,
      key text NOT NULL,
      fingerprint text NOT NULL,
      status integer NOT NULL,
      content_type text,
      body bytea NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (account_id, key)
    );
    CREATE INDEX idempotency_records_created ON idempotency_records(created_at);

    CREATE TABLE outbox (
      seq bigserial PRIMARY KEY,
      topic text NOT NULL,
      key text NOT NULL,
      event jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      published_at timestamptz
    );
    CREATE INDEX outbox_unpublished ON outbox(seq) WHERE published_at IS NULL;
  `)
})
