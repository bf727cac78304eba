import { createHash } from "node:crypto"
import { BoundedCache } from "../../infra/BoundedCache.js"
import type { DeferredAnswer, HttpExchange } from "../../infra/http/HttpServer.js"
import { cors, type Later, processing, RATING_HEADER, unavailable } from "./MediaAnswers.js"
import type { MediaDeps } from "./MediaConfig.js"

/** A strong validator from the blob key: the bytes under a key never change. */
const etagOf = (blobKey: string) => `"${createHash("sha256").update(blobKey).digest("base64url").slice(0, 27)}"`

/** If-None-Match (weak comparison, as RFC 9110 asks for it), `*` included. */
const matches = (ifNoneMatch: string, etag: string) => {
  if (ifNoneMatch === "") return false
  for (const raw of ifNoneMatch.split(",")) {
    const tag = raw.trim()
    if (tag === "*" || tag === etag || tag === `W/${etag}`) return true
  }
  return false
}

/** `/{id}.{ext}`: the image's bytes with its current rating; only the immutable bytes are cached. */
export const makeDelivery = (deps: MediaDeps, later: Later) => {
  // Keys are blob keys, whose bytes never change: an entry is never stale. One larger than an
  // eighth of the bound is not kept (it would flush everything else).
  const cache = new BoundedCache<string, Uint8Array>({
    maxWeight: deps.cacheBytes,
    weigh: (bytes) => bytes.byteLength,
    maxEntryWeight: deps.cacheBytes / 8
  })
  const loading = new Map<string, Promise<Uint8Array | undefined>>()

  const bytesOf = (key: string): Promise<Uint8Array | undefined> => {
    const cached = cache.get(key)
    if (cached !== undefined) return Promise.resolve(cached)
    let pending = loading.get(key)
    if (pending === undefined) {
      pending = deps.blob(key).then(
        (bytes) => {
          loading.delete(key)
          if (bytes !== undefined) cache.set(key, bytes)
          return bytes
        },
        (error) => {
          loading.delete(key)
          throw error
        }
      )
      loading.set(key, pending)
    }
    return pending
  }

  const deliver = (ex: HttpExchange, id: string, ext: string) => {
    const ifNoneMatch = ex.header("if-none-match")
    const answer = ex.defer()
    later(answer, async () => {
      const image = await deps.lookup(id)
      if (image === undefined || image.deleted || image.status === "failed" || image.ext !== ext) {
        return unavailable(answer)
      }
      if (image.status === "processing") return processing(answer)
      if (image.blob_key === null || image.mime_type === null) return unavailable(answer)
      const etag = etagOf(image.blob_key)
      const headers = (a: DeferredAnswer) =>
        cors(a)
          .writeHeader(RATING_HEADER, image.rating)
          .writeHeader("Cache-Control", "no-store")
          .writeHeader("X-Content-Type-Options", "nosniff")
          .writeHeader("ETag", etag)
      if (matches(ifNoneMatch, etag)) return headers(answer.writeStatus(304)).endWithoutBody()
      const bytes = await bytesOf(image.blob_key)
      if (bytes === undefined) {
        deps.onError(new Error(`image ${id} is ready but its blob ${image.blob_key} is missing`))
        return unavailable(answer)
      }
      headers(answer.writeStatus(200)).writeHeader("Content-Type", image.mime_type).end(bytes)
    })
  }

  return deliver
}
