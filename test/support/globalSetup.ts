import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Exit, Scope } from "effect"
import type { TestProject } from "vitest/node"
import { acquireEmbeddedPostgres } from "../../infra/EmbeddedPostgres.js"

declare module "vitest" {
  export interface ProvidedContext {
    /** A PostgreSQL server URL whose role may create databases. */
    pgServerUrl: string
    /** Which server the suites run against, for the report. */
    pgServerKind: "external" | "embedded"
  }
}

let scope: Scope.CloseableScope | undefined
let dir: string | undefined

/**
 * One PostgreSQL server for the whole run: TEST_DATABASE_URL when set (CI sets it to the
 * machine's server), otherwise the embedded one, started once here.
 */
export async function setup(project: TestProject) {
  const external = process.env.TEST_DATABASE_URL
  if (external !== undefined && external !== "") {
    project.provide("pgServerUrl", external)
    project.provide("pgServerKind", "external")
    return
  }
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "shortlinks-test-"))
  scope = Effect.runSync(Scope.make())
  const conn = await Effect.runPromise(Scope.extend(acquireEmbeddedPostgres(dir), scope))
  project.provide(
    "pgServerUrl",
    `postgres://${conn.username}:${encodeURIComponent(conn.password)}@${conn.host}:${conn.port}/${conn.database}`
  )
  project.provide("pgServerKind", "embedded")
}

export async function teardown() {
  if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void))
  if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true })
}
