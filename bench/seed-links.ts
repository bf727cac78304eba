/**
 * Seeds many links for bench/redirect-scale.sh straight into the links table (one INSERT …
 * SELECT over generate_series, no events: the redirector loads them from PostgreSQL at
 * start). Slugs are `s<n>` for n in 1..count, ids `link_scale<n>`, destinations
 * https://example.com/scale/<n>; with WIDTH, <n> has WIDTH digits (zeros in front), so every
 * link's slug, id and Location are as long as every other's, as a real service's random slugs
 * of one length are (bench/redirect-scale.sh: a one-link run and a million-link run then send
 * and answer requests of the same length).
 *
 *   node --import tsx bench/seed-links.ts ACCOUNT_ID COUNT [WIDTH]
 *
 * It attaches to the database the environment names (DATABASE_URL, or the embedded
 * PostgreSQL of DATA_DIR, which must be running) and prints how long the insert took.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer } from "effect"
import { AppConfig } from "../infra/AppConfig.js"
import { DatabaseLive } from "../infra/Database.js"

const [accountId, countText, widthText = "0"] = process.argv.slice(2)
const count = Number(countText)
const width = Number(widthText)
if (
  accountId === undefined ||
  !/^acct_[0-9A-Za-z]+$/.test(accountId) ||
  !Number.isInteger(count) ||
  count < 1 ||
  !Number.isInteger(width) ||
  width < 0
) {
  process.stderr.write("usage: node --import tsx bench/seed-links.ts ACCOUNT_ID COUNT [WIDTH]\n")
  process.exit(2)
}

const seed = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const started = Date.now()
  yield* sql`
    INSERT INTO links (id, account_id, slug, destination_url)
    SELECT 'link_scale' || n, ${accountId}, 's' || n, 'https://example.com/scale/' || n
    FROM generate_series(1, ${count}) AS g, LATERAL (SELECT lpad(g::text, greatest(${width}, length(g::text)), '0') AS n) AS padded
    ON CONFLICT DO NOTHING`
  yield* sql`ANALYZE links`
  const [row] = yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM links`
  process.stdout.write(`seeded ${count} links in ${Date.now() - started} ms (${row!.n} in the table)\n`)
})

Effect.runPromise(Effect.provide(seed, DatabaseLive.pipe(Layer.provide(AppConfig.layer)))).catch((error) => {
  process.stderr.write(`bench/seed-links.ts: ${error}\n`)
  process.exit(1)
})
