import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Hosted images: the record, its conversion job (under a durable lease; the private source
 * itself is in the blob store),
 * rating reviews and the rating audit trail, abuse reports from share pages, and the
 * storage counters the usage and the storage quota read.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`
    CREATE TABLE images (
      seq bigserial UNIQUE,
      id text PRIMARY KEY,
      account_id text NOT NULL REFERENCES accounts(id),
      status text NOT NULL DEFAULT 'processing' CHECK (status IN ('processing', 'ready', 'failed')),
      -- Uploaded with an Unmetered Partner Key: exempt from the storage and upload quotas for good.
      unmetered boolean NOT NULL DEFAULT false,
      -- auto | general | nsfw, as asked at creation.
      requested_rating text NOT NULL CHECK (requested_rating IN ('auto', 'general', 'nsfw')),
      -- The effective rating once ready (the API shows null while processing).
      rating text NOT NULL CHECK (rating IN ('general', 'sensitive', 'nsfw', 'unrated')),
      rating_source text CHECK (rating_source IN ('owner', 'classifier', 'operator')),
      source_format text NOT NULL,
      source_bytes bigint NOT NULL,
      source_url text,
      -- The private source in the blob store while it is kept: until the conversion ends (or
      -- the image is deleted), at most 24 hours; the worker's sweep removes it after.
      source_key text,
      -- Counted in storage while processing; 0 once the conversion ends.
      reserved_bytes bigint NOT NULL DEFAULT 0,
      mime_type text,
      ext text,
      blob_key text,
      width integer,
      height integer,
      frames integer,
      animated boolean,
      bytes bigint,
      failure text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      deleted_at timestamptz
    );
    CREATE INDEX images_account_seq ON images(account_id, seq DESC) WHERE deleted_at IS NULL;
    -- Blobs of deleted images still to remove.
    CREATE INDEX images_deleted_blobs ON images(deleted_at) WHERE deleted_at IS NOT NULL AND blob_key IS NOT NULL;
    CREATE INDEX images_sources ON images(updated_at) WHERE source_key IS NOT NULL;

    CREATE TABLE image_jobs (
      image_id text PRIMARY KEY REFERENCES images(id) ON DELETE CASCADE,
      attempts integer NOT NULL DEFAULT 0,
      tier text NOT NULL DEFAULT 'normal' CHECK (tier IN ('normal', 'fast')),
      not_before timestamptz NOT NULL DEFAULT now(),
      lease_owner text,
      lease_until timestamptz,
      last_error text,
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX image_jobs_due ON image_jobs(not_before);

    CREATE TABLE rating_reviews (
      id text PRIMARY KEY,
      image_id text NOT NULL REFERENCES images(id) ON DELETE CASCADE,
      account_id text NOT NULL,
      requested text NOT NULL CHECK (requested IN ('general', 'sensitive', 'nsfw')),
      current_rating text NOT NULL,
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected')),
      created_at timestamptz NOT NULL DEFAULT now(),
      decided_at timestamptz
    );
    CREATE UNIQUE INDEX rating_reviews_one_pending ON rating_reviews(image_id) WHERE status = 'pending';
    CREATE INDEX rating_reviews_image ON rating_reviews(image_id, created_at DESC);

    CREATE TABLE rating_changes (
      seq bigserial PRIMARY KEY,
      image_id text NOT NULL,
      account_id text NOT NULL,
      from_rating text,
      to_rating text NOT NULL,
      source text NOT NULL,
      actor text NOT NULL,
      at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX rating_changes_image ON rating_changes(image_id, seq);

    CREATE TABLE abuse_reports (
      id text PRIMARY KEY,
      image_id text NOT NULL,
      reason text NOT NULL,
      status text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX abuse_reports_open ON abuse_reports(created_at) WHERE status = 'open';

    CREATE TABLE storage_usage (
      account_id text NOT NULL REFERENCES accounts(id),
      unmetered boolean NOT NULL,
      bytes bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0),
      PRIMARY KEY (account_id, unmetered)
    );
  `)
})
