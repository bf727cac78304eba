import { Config } from "effect"
import type { ImageDelivery } from "../../domain/Image.js"
import type { TrustedProxies } from "../../infra/http/TrustedProxies.js"

/** One image's delivery state: one primary-key lookup per request, never a projection. */
export type ImageState = ImageDelivery

/** MEDIA_CACHE_BYTES: the in-memory cache of image bytes, bounded by their total size (0: off). */
export const mediaCacheBytesConfig = Config.integer("MEDIA_CACHE_BYTES").pipe(
  Config.validate({ message: "must be a whole number of bytes, 0 or more", validation: (n) => n >= 0 }),
  Config.withDefault(256 * 1024 * 1024)
)

/** MEDIA_REPORTS_PER_MINUTE: abuse reports one client address may file per minute. */
export const mediaReportsPerMinuteConfig = Config.integer("MEDIA_REPORTS_PER_MINUTE").pipe(
  Config.validate({ message: "must be a whole number, 1 or more", validation: (n) => n >= 1 }),
  Config.withDefault(5)
)

export interface MediaDeps {
  /** The image's state now; undefined when there is no such id. Rejects when the database fails. */
  readonly lookup: (id: string) => Promise<ImageState | undefined>
  /** The published bytes; undefined when the store has no such object. Rejects when it fails. */
  readonly blob: (key: string) => Promise<Uint8Array | undefined>
  readonly ping: () => Promise<void>
  readonly report: (id: string, reason: string) => Promise<void>
  /** Path prefix of PUBLIC_IMAGE_HOST ("" at the root). */
  readonly basePath: string
  readonly cacheBytes: number
  readonly reportsPerMinute: number
  /** TRUSTED_PROXIES: whose X-Forwarded-For names the client that reports (none when absent). */
  readonly trustedProxies?: TrustedProxies
  readonly onError: (error: unknown) => void
}
