import { randomBytes } from "node:crypto"
import pg from "pg"
import { inject } from "vitest"
import { WaitForTimeoutError, waitFor } from "./waitFor.js"

/** A fresh, empty database on the suite's server: each test file gets its own. */
export const createTestDatabase = async (): Promise<string> => {
  const serverUrl = inject("pgServerUrl")
  const name = `t_${randomBytes(6).toString("hex")}`
  const client = new pg.Client({ connectionString: serverUrl })
  await client.connect()
  try {
    await client.query(`CREATE DATABASE ${name}`)
  } finally {
    await client.end()
  }
  const url = new URL(serverUrl)
  url.pathname = `/${name}`
  return url.toString()
}

export const dropTestDatabase = async (databaseUrl: string): Promise<void> => {
  const name = new URL(databaseUrl).pathname.slice(1)
  const client = new pg.Client({ connectionString: inject("pgServerUrl") })
  await client.connect()
  try {
    // Connections a disposed runtime is still closing (a LISTEN client ending, say) are given
    // time to end: cut by the FORCE below while they end, they raise an error nobody handles.
    // One that stays open (a client a test never ended) is cut after the deadline all the same.
    await waitFor(
      async () =>
        (await client.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1", [name])).rows[0].n ===
        0,
      { timeoutMs: 15_000, message: `the connections to ${name} to close` }
    ).catch((error) => {
      if (!(error instanceof WaitForTimeoutError)) throw error
    })
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  } finally {
    await client.end()
  }
}
