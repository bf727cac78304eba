import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Snapshots: the record (with its manifest, immutable once captured), the capture job under
 * a short durable lease, and the content-addressed blobs already stored (identical bytes
 * are stored once across snapshots).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`
    CREATE TABLE snapshots (
      seq bigserial UNIQUE,
      id text PRIMARY KEY,
      account_id text NOT NULL REFERENCES accounts(id),
      url text NOT NULL,
      host text NOT NULL,
      capture_status text NOT NULL DEFAULT 'queued'
        CHECK (capture_status IN ('queued', 'capturing', 'captured', 'failed')),
      publication_status text NOT NULL DEFAULT 'unpublished'
        CHECK (publication_status IN ('unpublished', 'published', 'withdrawn')),
      unmetered boolean NOT NULL DEFAULT false,
      final_url text,
      http_status integer,
      title text,
      content_type text,
      bytes bigint,
      sha256 text,
      resource_count integer NOT NULL DEFAULT 0,
      resource_bytes bigint NOT NULL DEFAULT 0,
      manifest jsonb,
      failure text,
      created_at timestamptz NOT NULL DEFAULT now(),
      captured_at timestamptz,
      updated_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX snapshots_account_seq ON snapshots(account_id, seq DESC);
    CREATE INDEX snapshots_in_progress ON snapshots(account_id, host)
      WHERE capture_status IN ('queued', 'capturing');

    CREATE TABLE snapshot_jobs (
      snapshot_id text PRIMARY KEY REFERENCES snapshots(id) ON DELETE CASCADE,
      attempts integer NOT NULL DEFAULT 0,
      not_before timestamptz NOT NULL DEFAULT now(),
      lease_owner text,
      lease_until timestamptz,
      last_error text,
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX snapshot_jobs_due ON snapshot_jobs(not_before);

    CREATE TABLE snapshot_blobs (
      sha256 text PRIMARY KEY,
      bytes bigint NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    );
  `)
})
