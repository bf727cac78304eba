import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Usage counters for the plan quotas: one row per account, calendar month (UTC, `YYYY-MM`)
 * and metric, moved in the same transaction as the use it counts. Links created before
 * this migration are counted in the month they were created.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`
    CREATE TABLE usage_counters (
      account_id text NOT NULL REFERENCES accounts(id),
      period text NOT NULL CHECK (period ~ '^[0-9]{4}-[0-9]{2}$'),
      metric text NOT NULL,
      value bigint NOT NULL DEFAULT 0 CHECK (value >= 0),
      PRIMARY KEY (account_id, period, metric)
    );

    INSERT INTO usage_counters (account_id, period, metric, value)
    SELECT account_id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM'), 'links', count(*)
    FROM links
    GROUP BY 1, 2;
  `)
})
