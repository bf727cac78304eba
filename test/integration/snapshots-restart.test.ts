import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, startTestApi, type TestAccount, type TestApi } from "../support/api.js"
import { expectEnvelope } from "../support/http.js"
import type { Envelope, Snapshot } from "../support/resources.js"
import { startSite } from "../support/snapshotSite.js"
import { tempBlobDir } from "../support/snapshots.js"
import { waitFor } from "../support/waitFor.js"

const root = path.resolve(import.meta.dirname, "../..")
const LEASE_MS = 15_000
let t: TestApi
let acct: TestAccount
let site: Awaited<ReturnType<typeof startSite>>
const blobDir = tempBlobDir()
const children = new Set<ChildProcess>()

beforeAll(async () => {
  // The slow image keeps each capture busy for 4 s: long enough to stop a worker in the middle.
  site = await startSite(4_000)
  t = await startTestApi({ blobDir })
  acct = await t.newAccount()
})
afterAll(async () => {
  for (const child of children) child.kill("SIGKILL")
  await site?.close()
  await t?.close()
  fs.rmSync(blobDir, { recursive: true, force: true })
})

/** A capture worker process; resolves once it runs. */
const startWorker = async () => {
  const child = spawn(process.execPath, ["--import", "tsx", "test/support/captureWorkerProcess.ts"], {
    cwd: root,
    env: { ...process.env, DATABASE_URL: t.databaseUrl, BLOB_DIR: blobDir, SNAPSHOT_LEASE_MS: String(LEASE_MS) },
    stdio: ["ignore", "pipe", "inherit"]
  })
  children.add(child)
  let out = ""
  child.stdout!.on("data", (c) => (out += c))
  await waitFor(() => out.includes("ready"), { timeoutMs: 120_000, message: "the worker process to start" })
  return child
}

const stopped = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once("exit", () => resolve())
  })

const snapshotOf = async (id: string) =>
  expectEnvelope(await call<Envelope<Snapshot>>(`${t.api}/snapshots/${id}`, { key: acct.key }), 200)

/** Requests a capture and waits until the worker is in the middle of it (fetching the slow image). */
const midCapture = async () => {
  const before = site.hits.get("/img/slow.png") ?? 0
  const r = await call<Envelope<Snapshot>>(`${t.api}/snapshots`, {
    method: "POST",
    key: acct.key,
    body: { url: `${site.origin}/page.html` }
  })
  const s = expectEnvelope(r, 202)
  await waitFor(
    async () =>
      (site.hits.get("/img/slow.png") ?? 0) > before && (await snapshotOf(s.id)).capture_status === "capturing",
    {
      timeoutMs: 60_000,
      message: "the capture to be under way"
    }
  )
  return s.id
}

describe("stopping the capture worker mid-capture", { timeout: 240_000 }, () => {
  it("SIGTERM gives the lease back: a restarted worker completes the snapshot within seconds, well under a lease", async () => {
    const first = await startWorker()
    const id = await midCapture()
    first.kill("SIGTERM")
    await stopped(first)
    // Given back: the snapshot waits as queued, not stuck in capturing.
    expect((await snapshotOf(id)).capture_status).toBe("queued")
    // The job is free at once: no lease held by the stopped worker.
    const db = new pg.Client({ connectionString: t.databaseUrl })
    await db.connect()
    const job = (await db.query("SELECT lease_owner, lease_until FROM snapshot_jobs WHERE snapshot_id = $1", [id]))
      .rows[0]
    await db.end()
    expect(job).toEqual({ lease_owner: null, lease_until: null })
    await startWorker()
    const readyAt = performance.now()
    const done = await waitFor(
      async () => ((await snapshotOf(id)).capture_status === "captured" ? performance.now() : false),
      {
        timeoutMs: 60_000
      }
    )
    const s = await snapshotOf(id)
    expect(s.publication_status).toBe("published")
    expect(s.resources.count).toBe(16)
    // The capture itself takes ~4 s (the slow image); no lease is waited for.
    expect(done - readyAt).toBeLessThan(LEASE_MS)
  })

  it("SIGKILL (no goodbye): another running worker completes the snapshot once the short lease expires", async () => {
    const standby = await startWorker()
    const victim = await startWorker()
    standby.kill("SIGSTOP")
    const id = await midCapture().catch(async (e) => {
      standby.kill("SIGCONT")
      throw e
    })
    victim.kill("SIGKILL")
    await stopped(victim)
    const killedAt = performance.now()
    standby.kill("SIGCONT")
    const done = await waitFor(
      async () => ((await snapshotOf(id)).capture_status === "captured" ? performance.now() : false),
      {
        timeoutMs: 90_000
      }
    )
    // The lease (15 s) runs out, the standby's sweep (200 ms) finds the job, the capture takes ~4 s.
    expect(done - killedAt).toBeLessThan(LEASE_MS + 15_000)
    expect((await snapshotOf(id)).capture_status).toBe("captured")
  })

  it("a page whose capture keeps killing its worker ends failed after the attempts, not retried forever", async () => {
    for (const child of children) child.kill("SIGKILL")
    await Promise.all([...children].map(stopped))
    const r = await call<Envelope<Snapshot>>(`${t.api}/snapshots`, {
      method: "POST",
      key: acct.key,
      body: { url: `${site.origin}/page.html` }
    })
    const id = expectEnvelope(r, 202).id
    // Three workers died on it: each left its lease to run out (a clean stop gives it back).
    const db = new pg.Client({ connectionString: t.databaseUrl })
    await db.connect()
    await db.query(
      `UPDATE snapshot_jobs SET lease_owner = 'gone', lease_until = clock_timestamp() - interval '1 second', attempts = 3
       WHERE snapshot_id = $1`,
      [id]
    )
    await db.end()
    await startWorker()
    // The fourth taking-over counts as the fourth attempt: failed, with a reason.
    const s = await waitFor(
      async () => {
        const now = await snapshotOf(id)
        return now.capture_status === "failed" ? now : false
      },
      { timeoutMs: 60_000, message: "the snapshot to end failed" }
    )
    expect(s.failure).toMatch(/^capture_aborted: the capture stopped its worker 4 times/)
    expect(s.publication_status).toBe("unpublished")
  })
})
