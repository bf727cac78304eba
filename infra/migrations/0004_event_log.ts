import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The embedded event log (used when no Kafka brokers are configured) and the wake-up
 * signal of the outbox relay.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`
    CREATE TABLE event_log (
      topic text NOT NULL,
      partition integer NOT NULL,
      "offset" bigint NOT NULL,
      key text NOT NULL,
      value text NOT NULL,
      appended_at timestamptz NOT NULL DEFAULT clock_timestamp(),
      PRIMARY KEY (topic, partition, "offset")
    );
    -- Start at a time: the first offset appended at or after it.
    CREATE INDEX event_log_appended ON event_log(topic, partition, appended_at);

    -- The next offset per partition; its row lock orders the appends of a partition.
    CREATE TABLE event_log_heads (
      topic text NOT NULL,
      partition integer NOT NULL,
      next_offset bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (topic, partition)
    );

    -- Committed positions of consumer groups; a member holds the row lock while it works.
    CREATE TABLE event_log_offsets (
      group_id text NOT NULL,
      topic text NOT NULL,
      partition integer NOT NULL,
      next_offset bigint NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (group_id, topic, partition)
    );

    -- LISTEN in @effect/sql-pg drops notifications with an empty payload.
    CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('outbox', 'new');
      RETURN NULL;
    END
    $$;
    CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
      FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

    -- The relay's purge of rows published long ago.
    CREATE INDEX outbox_published ON outbox(published_at) WHERE published_at IS NOT NULL;
  `)
})
