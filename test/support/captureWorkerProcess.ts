import { startCaptureWorker, TEST_BUDGET } from "./snapshots.js"

/**
 * A capture worker in a process of its own, for the restart tests: DATABASE_URL, BLOB_DIR and
 * SNAPSHOT_LEASE_MS from the environment. SIGTERM stops it as the real worker stops (its
 * leases are given back); SIGKILL leaves them to expire. Prints "ready" once it runs.
 */
const databaseUrl = process.env.DATABASE_URL!
const blobDir = process.env.BLOB_DIR!
const leaseMs = Number(process.env.SNAPSHOT_LEASE_MS ?? 15_000)
const runtime = await startCaptureWorker(databaseUrl, blobDir, {
  leaseMs,
  budget: { ...TEST_BUDGET, resourceTimeoutMs: 30_000 }
})
process.on("SIGTERM", () => {
  void runtime.dispose().then(() => process.exit(0))
})
process.stdout.write("ready\n")
