import { createHash } from "node:crypto"
import { Data, Effect } from "effect"
import { BlobStore, type BlobStoreShape } from "../../../domain/ports/BlobStore.js"
import { type FetchError, type FetchedResponse, SafeFetcher } from "../../../domain/ports/SafeFetcher.js"
import { type CaptureResult, SnapshotJobRepo, type SnapshotJobRepoShape } from "../../../domain/ports/SnapshotRepo.js"
import {
  type ManifestEntry,
  SNAPSHOT_BUDGET,
  type SnapshotBudget,
  snapshotBlobKey,
  snapshotResourceName
} from "../../../domain/Snapshot.js"
import { processCss, type Rewritable } from "./Css.js"
import { processHtml } from "./Html.js"

/** Why a capture did not succeed; `temporary` ones are retried. */
export class CaptureFailed extends Data.TaggedError("CaptureFailed")<{
  readonly reason: string
  readonly temporary: boolean
}> {}

export type CaptureBudget = SnapshotBudget

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")
const KEPT_HEADERS = ["date", "last-modified", "etag", "content-language", "content-encoding"]
const isHtml = (type: string) => /^\s*(text\/html|application\/xhtml\+xml)\b/i.test(type)
const isCss = (type: string) => /^\s*text\/css\b/i.test(type)
const isScript = (type: string) => /(java|ecma)script|^\s*text\/jsx?\b|wasm/i.test(type)

/** The text of bytes in the charset the Content-Type names (UTF-8 when none or unknown). */
const decodeText = (bytes: Uint8Array, contentType: string) => {
  const charset = /charset=["']?([\w-]+)/i.exec(contentType)?.[1] ?? "utf-8"
  try {
    return new TextDecoder(charset).decode(bytes)
  } catch {
    return new TextDecoder("utf-8").decode(bytes)
  }
}

/** The page's fetch failure in words a client reads in `failure`. */
export const pageFailure = (e: FetchError): CaptureFailed => {
  switch (e._tag) {
    case "UrlNotAllowed":
      return new CaptureFailed({ reason: `url_not_allowed: ${e.reason}`, temporary: false })
    case "RedirectNotAllowed":
      return new CaptureFailed({ reason: `redirect_not_allowed: ${e.location}: ${e.reason}`, temporary: false })
    case "SourceTooLarge":
      return new CaptureFailed({
        reason: `source_too_large: the page is larger than ${e.limit} bytes`,
        temporary: false
      })
    case "SourceForbidden":
      return new CaptureFailed({ reason: "source_forbidden: the site answered 403", temporary: false })
    case "SourceRejected":
      return new CaptureFailed({ reason: `source_rejected: the site answered HTTP ${e.status}`, temporary: false })
    case "SourceUnreachable":
      return new CaptureFailed({ reason: `source_unreachable: ${e.reason}`, temporary: true })
  }
}

const resourceFailure = (e: FetchError): string =>
  e._tag === "SourceRejected"
    ? `HTTP ${e.status}`
    : e._tag === "SourceTooLarge"
      ? "budget: total bytes"
      : `${e._tag}: ${"reason" in e ? e.reason : ""}`

interface Fetched {
  readonly url: string
  readonly response: FetchedResponse
  readonly sha256: string
  readonly css: Rewritable | undefined
}

const entryOf = (f: Fetched, servedSha256: string): ManifestEntry => ({
  url: f.url,
  finalUrl: f.response.finalUrl,
  status: f.response.status,
  contentType: f.response.headers["content-type"] ?? "application/octet-stream",
  sha256: f.sha256,
  bytes: f.response.body.length,
  servedSha256,
  headers: Object.fromEntries(KEPT_HEADERS.flatMap((h) => (f.response.headers[h] ? [[h, f.response.headers[h]!]] : [])))
})

/** Stores each blob by its SHA-256 once: one already known (an earlier capture's) is not written again. */
const storeOnce = (
  jobs: SnapshotJobRepoShape,
  blobs: BlobStoreShape,
  toStore: ReadonlyMap<string, { readonly bytes: Uint8Array; readonly type: string }>,
  concurrency: number
) =>
  Effect.forEach(
    toStore,
    ([sha, { bytes, type }]) =>
      Effect.gen(function* () {
        if (yield* jobs.blobKnown(sha)) return
        yield* blobs.put(snapshotBlobKey(sha), bytes, type)
        yield* jobs.blobStored(sha, bytes.length)
      }),
    { concurrency, discard: true }
  )

/**
 * One capture: the page through the SSRF-safe fetcher (HTML up to the budget's bytes), then
 * its sub-resources level by level (stylesheets' own references one level deeper), each
 * through the same fetcher, within the budget; every reference rewritten to the stored
 * copies; every response stored once by SHA-256. Never runs or fetches scripts.
 */
export const capturePage = (url: string, budget: CaptureBudget = SNAPSHOT_BUDGET) =>
  Effect.gen(function* () {
    const fetcher = yield* SafeFetcher
    const blobs = yield* BlobStore
    const jobs = yield* SnapshotJobRepo

    const page = yield* fetcher
      .fetch(url, {
        maxBytes: budget.maxPageBytes,
        timeoutMs: budget.pageTimeoutMs,
        maxRedirects: budget.maxRedirects,
        accept: "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5"
      })
      .pipe(Effect.mapError(pageFailure))
    const pageType = page.headers["content-type"] ?? "application/octet-stream"
    const parsed = isHtml(pageType) ? processHtml(decodeText(page.body, pageType), page.finalUrl) : undefined

    const fetched = new Map<string, Fetched>()
    const skipped: Array<{ url: string; reason: string }> = []
    const seen = new Set<string>()
    let reservedCount = 0
    let totalBytes = 0

    const fetchOne = (ref: string) =>
      Effect.gen(function* () {
        if (reservedCount >= budget.maxResources) {
          skipped.push({ url: ref, reason: `budget: more than ${budget.maxResources} resources` })
          return []
        }
        const remaining = budget.maxResourceBytes - totalBytes
        if (remaining <= 0) {
          skipped.push({ url: ref, reason: `budget: more than ${budget.maxResourceBytes} bytes` })
          return []
        }
        reservedCount++
        const response = yield* fetcher
          .fetch(ref, { maxBytes: remaining, timeoutMs: budget.resourceTimeoutMs, maxRedirects: budget.maxRedirects })
          .pipe(Effect.either)
        if (response._tag === "Left") {
          reservedCount--
          skipped.push({ url: ref, reason: resourceFailure(response.left) })
          return []
        }
        const r = response.right
        const type = r.headers["content-type"] ?? "application/octet-stream"
        if (isScript(type) || isHtml(type) || totalBytes + r.body.length > budget.maxResourceBytes) {
          reservedCount--
          skipped.push({
            url: ref,
            reason: isScript(type) || isHtml(type) ? `not stored: ${type}` : "budget: total bytes"
          })
          return []
        }
        totalBytes += r.body.length
        const css = isCss(type) ? processCss(decodeText(r.body, type), r.finalUrl, "stylesheet") : undefined
        fetched.set(ref, { url: ref, response: r, sha256: sha256(r.body), css })
        return css?.refs ?? []
      })

    let level = parsed?.refs ?? []
    for (let depth = 0; depth <= budget.maxCssDepth && level.length > 0; depth++) {
      const fresh = level.filter((ref) => !seen.has(ref))
      for (const ref of fresh) seen.add(ref)
      const next = yield* Effect.forEach(fresh, fetchOne, { concurrency: budget.concurrency })
      level = next.flat()
    }
    for (const ref of level)
      if (!seen.has(ref)) skipped.push({ url: ref, reason: "budget: stylesheets nested too deep" })

    // Stored copies: every resource under its original bytes' hash; stylesheets and the page rewritten.
    const toStore = new Map<string, { bytes: Uint8Array; type: string }>()
    const nameOf = (ref: string) => {
      const f = fetched.get(ref)
      return f === undefined ? undefined : snapshotResourceName(f.sha256).slice(2)
    }
    const resources: Array<ManifestEntry> = []
    for (const f of fetched.values()) {
      const type = f.response.headers["content-type"] ?? "application/octet-stream"
      toStore.set(f.sha256, { bytes: f.response.body, type })
      if (f.css === undefined) {
        resources.push(entryOf(f, f.sha256))
        continue
      }
      const served = new TextEncoder().encode(f.css.render(nameOf))
      const servedSha = sha256(served)
      toStore.set(servedSha, { bytes: served, type: "text/css; charset=utf-8" })
      resources.push(entryOf(f, servedSha))
    }
    const capturedAt = new Date().toISOString()
    const pageSha = sha256(page.body)
    toStore.set(pageSha, { bytes: page.body, type: pageType })
    let pageServedSha = pageSha
    if (parsed !== undefined) {
      parsed.addNotice(capturedAt, page.finalUrl)
      const served = new TextEncoder().encode(
        parsed.render((ref) => (fetched.has(ref) ? snapshotResourceName(fetched.get(ref)!.sha256) : undefined))
      )
      pageServedSha = sha256(served)
      toStore.set(pageServedSha, { bytes: served, type: "text/html; charset=utf-8" })
    }
    yield* storeOnce(jobs, blobs, toStore, budget.concurrency)

    const pageEntry = entryOf({ url, response: page, sha256: pageSha, css: undefined }, pageServedSha)
    return {
      finalUrl: page.finalUrl,
      httpStatus: page.status,
      title: parsed?.title ?? null,
      contentType: pageType,
      bytes: page.body.length,
      sha256: pageSha,
      resourceCount: resources.length,
      resourceBytes: totalBytes,
      manifest: { page: pageEntry, resources, skipped, capturedAt }
    } satisfies CaptureResult
  })
