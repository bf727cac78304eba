import * as fs from "node:fs"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { Layer, Logger, LogLevel, ManagedRuntime, Option, Redacted } from "effect"
import sharp from "sharp"
import { SnapshotHost, SnapshotHostLayer } from "../../apps/snapshots/SnapshotHost.js"
import { type SnapshotCaptureOptions, snapshotCaptureLayer } from "../../apps/workers/SnapshotCapture.js"
import { BlobStore } from "../../domain/ports/BlobStore.js"
import { SNAPSHOT_BUDGET } from "../../domain/Snapshot.js"
import { AppConfig } from "../../infra/AppConfig.js"
import { makeFsBlobStore } from "../../infra/blobstore/FsBlobStore.js"
import { DatabaseLive } from "../../infra/Database.js"
import { safeFetcherLayer } from "../../infra/fetcher/SafeFetcher.js"
import { DatabasePortsLive } from "../../infra/postgres/Layers.js"
import { OutboxLive } from "../../infra/postgres/Outbox.js"
import { SnapshotReposLive } from "../../infra/postgres/Snapshots.js"

/** A blob directory a test's API, workers and snapshot host share. */
export const tempBlobDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "shortlinks-snapshot-blobs-"))

/** Every file under a directory (the content-addressed blobs). */
export const filesUnder = (dir: string): Array<string> =>
  fs.existsSync(dir)
    ? fs
        .readdirSync(dir, { recursive: true, withFileTypes: true })
        .filter((e) => e.isFile())
        .map((e) => e.name)
    : []

/** A test budget: short timeouts so that slow origins end a test quickly. */
export const TEST_BUDGET = { ...SNAPSHOT_BUDGET, pageTimeoutMs: 4_000, resourceTimeoutMs: 3_000 }

/** Engines of a capture worker or snapshot host: the test database, the shared blobs, a loopback-allowing fetcher. */
const engines = (databaseUrl: string, blobDir: string) =>
  Layer.mergeAll(SnapshotReposLive, DatabasePortsLive).pipe(
    Layer.provide(OutboxLive),
    Layer.provideMerge(Layer.succeed(BlobStore, makeFsBlobStore(blobDir))),
    Layer.provideMerge(safeFetcherLayer({ allowLoopback: true, retries: 1, retryDelayMs: 50 })),
    Layer.provideMerge(DatabaseLive),
    Layer.provideMerge(AppConfig.make({ databaseUrl: Option.some(Redacted.make(databaseUrl)), snapshotPort: 0 })),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
  )

/** A capture worker (its own runtime: dispose it to stop the worker as SIGTERM would). */
export const startCaptureWorker = async (
  databaseUrl: string,
  blobDir: string,
  options: Partial<SnapshotCaptureOptions> = {}
) => {
  const runtime = ManagedRuntime.make(
    snapshotCaptureLayer({ budget: TEST_BUDGET, sweepMs: 200, retryBaseMs: 100, ...options }).pipe(
      Layer.provide(engines(databaseUrl, blobDir))
    )
  )
  await runtime.runtime()
  return runtime
}

/** The snapshot host on a random port; `origin` is where it answers. */
export const startSnapshotHost = async (databaseUrl: string, blobDir: string) => {
  const runtime = ManagedRuntime.make(SnapshotHostLayer.pipe(Layer.provide(engines(databaseUrl, blobDir))))
  const host = await runtime.runPromise(SnapshotHost)
  return { origin: `http://127.0.0.1:${host.port}`, close: () => runtime.dispose() }
}

export type Route = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>

/** A local origin server (reachable only through the fetcher's loopback allowance), counting requests per path. */
export const startOrigin = async (routes: Record<string, Route>) => {
  const hits = new Map<string, number>()
  const server: Server = createServer((req, res) => {
    const p = new URL(req.url ?? "/", "http://x").pathname
    hits.set(p, (hits.get(p) ?? 0) + 1)
    const route = routes[p]
    if (route === undefined) {
      res.writeHead(404, { "content-type": "text/plain" }).end("no such page")
      return
    }
    Promise.resolve(route(req, res)).catch(() => res.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  return {
    origin: `http://127.0.0.1:${port}`,
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

export const send =
  (type: string, body: string | Uint8Array, status = 200): Route =>
  (_req, res) => {
    res.writeHead(status, { "content-type": type }).end(body)
  }

/** A small valid PNG (24×24) whose colour (and so bytes) depends on the seed. */
export const png = (seed: number): Promise<Buffer> =>
  sharp({
    create: {
      width: 24,
      height: 24,
      channels: 3,
      background: { r: (seed * 53) % 256, g: (seed * 97) % 256, b: (seed * 29) % 256 }
    }
  })
    .png()
    .toBuffer()
