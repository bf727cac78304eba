import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Layer, Logger, LogLevel, ManagedRuntime } from "effect"
import { afterAll, beforeAll } from "vitest"
import type { EventLog } from "../../domain/EventLog.js"
import { OutboxRelayLive } from "../../infra/postgres/OutboxRelay.js"
import { startTestApi, type TestAccount, type TestApi } from "./api.js"
import { embeddedEventLogLayer } from "./eventlog.js"
import { type RedirectorProcess, stop } from "./redirectorProcess.js"

/**
 * What a suite of real redirector processes (`apps/redirector/main.ts`) shares, set up before
 * its tests and torn down after them: a test API over a database of its own with one account,
 * the outbox relay feeding the link events into the embedded event log in that database (read
 * through `infra`), a data directory, and every process the suite `track`s (killed at the end
 * if a test has not stopped it). Kept apart from redirectorProcess.ts, which the crash
 * benchmark imports without vitest.
 */
export interface RedirectorSuite {
  readonly api: TestApi
  readonly account: TestAccount
  readonly infra: ManagedRuntime.ManagedRuntime<EventLog, unknown>
  readonly dataDir: string
  track(p: RedirectorProcess): RedirectorProcess
}

/** Registers the suite's beforeAll and afterAll; its fields are set once beforeAll has run. */
export const redirectorSuite = (name: string): RedirectorSuite => {
  const started: Array<RedirectorProcess> = []
  const suite = {
    track: (p: RedirectorProcess) => {
      started.push(p)
      return p
    }
  } as { -readonly [K in keyof RedirectorSuite]: RedirectorSuite[K] }
  beforeAll(async () => {
    suite.api = await startTestApi()
    suite.account = await suite.api.newAccount()
    suite.infra = ManagedRuntime.make(
      OutboxRelayLive.pipe(
        Layer.provideMerge(embeddedEventLogLayer(suite.api.databaseUrl)),
        Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
      )
    ) as never
    await suite.infra.runPromise(Effect.void)
    suite.dataDir = fs.mkdtempSync(path.join(process.cwd(), `.tmp-${name}-`))
  }, 180_000)
  afterAll(async () => {
    await Promise.all(started.map((p) => stop(p, "SIGKILL")))
    await suite.infra?.dispose()
    await suite.api?.close()
    if (suite.dataDir !== undefined) fs.rmSync(suite.dataDir, { recursive: true, force: true })
  }, 120_000)
  return suite
}
