/**
 * bench/redirect.sh --crash: a redirector of its own (click capture and spool on), killed
 * with SIGKILL in the middle of a burst of GETs, BENCH_KILLS times (default 5), restarted
 * after each kill; a last start publishes what the spool still holds and is stopped with
 * SIGTERM. Counts the GETs that got their 302 (a whole response) and the GETs sent; the
 * script then compares the analytics' count with them.
 *
 *   node --import tsx bench/redirect-crash.ts PORT PATH    (the environment names the service)
 *
 * The last line on stdout: CRASH_RESULT {"kills", "redirected", "sent", "mapped", "per_kill": [...]}
 * ("mapped": whether the spool's files were mapped, as every start said).
 */
import { clicksInSpool, SPOOL_UNMAPPED } from "../apps/redirector/ClickSpool.js"
import { burst, spawnRedirector, stop, waitReady } from "../test/support/redirectorProcess.js"
import { waitFor } from "../test/support/waitFor.js"

const [portText, slugPath] = process.argv.slice(2)
const port = Number(portText)
const kills = Number(process.env.BENCH_KILLS ?? 5)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 64)
const spoolDir = process.env.REDIRECTOR_SPOOL_DIR
if (!Number.isInteger(port) || slugPath === undefined || !slugPath.startsWith("/") || spoolDir === undefined) {
  process.stderr.write("usage: REDIRECTOR_SPOOL_DIR=… node --import tsx bench/redirect-crash.ts PORT /PATH\n")
  process.exit(2)
}
// LOG_LEVEL stays Info (spawnRedirector's): waitReady waits for the "slug table loaded" line too.
const env = { SHORT_PORT: String(port), CLICK_CAPTURE: "on" }
const url = `http://127.0.0.1:${port}${slugPath}`
const spooled = () => clicksInSpool(spoolDir)

const main = async () => {
  let redirected = 0
  let sent = 0
  const perKill: Array<{ redirected: number; sent: number; spooled: number }> = []
  let mapped = true
  for (let i = 0; i < kills; i++) {
    const p = spawnRedirector(env)
    await waitReady(p)
    // The start says so when the spool's files cannot be mapped.
    if (p.output().includes(SPOOL_UNMAPPED)) mapped = false
    const load = burst(url, connections)
    // Somewhere between 1,000 and 5,000 redirects into the burst.
    const target = 1_000 + Math.floor(Math.random() * 4_000)
    await waitFor(() => load.redirected() >= target, { timeoutMs: 120_000, intervalMs: 1 })
    p.child.kill("SIGKILL")
    await p.exited
    const r = await load.stop()
    redirected += r.redirected
    sent += r.sent
    perKill.push({ ...r, spooled: spooled() })
    process.stdout.write(
      `kill ${i + 1}: ${r.redirected} redirects (${r.sent} sent), ${perKill.at(-1)!.spooled} clicks in the spool\n`
    )
  }
  const last = spawnRedirector(env)
  await waitReady(last)
  await waitFor(() => spooled() === 0, { timeoutMs: 120_000, message: "the spool to be published" })
  const code = await stop(last)
  if (code !== 0) throw new Error(`the last redirector exited with ${code}`)
  process.stdout.write(`CRASH_RESULT ${JSON.stringify({ kills, redirected, sent, mapped, per_kill: perKill })}\n`)
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`bench/redirect-crash.ts: ${error instanceof Error ? error.message : error}\n`)
    process.exit(1)
  }
)
