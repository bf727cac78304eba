import type { DeferredAnswer, HttpAnswer } from "../../infra/http/HttpServer.js"
import type { MediaDeps } from "./MediaConfig.js"
import { PAGE_CSP } from "./SharePage.js"

export const HTML = "text/html; charset=utf-8"
export const TEXT = "text/plain; charset=utf-8"
const SVG = "image/svg+xml"
export const RATING_HEADER = "X-Service-Content-Rating"

const placeholder = (text: string) =>
  `<svg xmlns="http://www.w3.org/2000/svg" width="320" height="180" viewBox="0 0 320 180">` +
  `<rect width="320" height="180" fill="#e5e5e5"/>` +
  `<text x="160" y="96" font-family="sans-serif" font-size="18" fill="#555" text-anchor="middle">${text}</text></svg>\n`

/** What a processing image answers (202, no rating header). */
export const PROCESSING_PLACEHOLDER = placeholder("Processing…")
/** What an unknown, deleted, failed or mistyped image URL answers (404, no rating header). */
export const UNAVAILABLE_PLACEHOLDER = placeholder("Image not available")

export const cors = <A extends HttpAnswer>(a: A): A =>
  a.writeHeader("Access-Control-Allow-Origin", "*").writeHeader("Access-Control-Expose-Headers", RATING_HEADER)

export const unavailable = (a: HttpAnswer) =>
  cors(a.writeStatus(404))
    .writeHeader("Content-Type", SVG)
    .writeHeader("Cache-Control", "no-store")
    .writeHeader("X-Content-Type-Options", "nosniff")
    .writeHeader("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
    .end(UNAVAILABLE_PLACEHOLDER)

export const processing = (a: HttpAnswer) =>
  cors(a.writeStatus(202))
    .writeHeader("Content-Type", SVG)
    .writeHeader("Cache-Control", "no-store")
    .writeHeader("X-Content-Type-Options", "nosniff")
    .writeHeader("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
    .writeHeader("Retry-After", "1")
    .end(PROCESSING_PLACEHOLDER)

const unavailableNow = (a: HttpAnswer) =>
  a
    .writeStatus(503)
    .writeHeader("Content-Type", TEXT)
    .writeHeader("Cache-Control", "no-store")
    .writeHeader("Retry-After", "1")
    .end("Temporarily unavailable, try again in a moment.\n")

/** Status first: uWebSockets.js writes "200 OK" itself when a header comes before it. */
export const html = (a: HttpAnswer, status: number, body: string, extra?: readonly [string, string]) => {
  a.writeStatus(status)
  if (extra !== undefined) a.writeHeader(extra[0], extra[1])
  a.writeHeader("Content-Type", HTML)
    .writeHeader("Cache-Control", "no-store")
    .writeHeader("X-Content-Type-Options", "nosniff")
    .writeHeader("Content-Security-Policy", PAGE_CSP)
    .writeHeader("Referrer-Policy", "no-referrer")
    .end(body)
}

export const methodNotAllowed = (a: HttpAnswer, allow: string, withCors = false) => {
  a.writeStatus(405)
  if (withCors) cors(a)
  a.writeHeader("Allow", allow).writeHeader("Content-Type", TEXT).end("Method Not Allowed\n")
}

/** Runs an answer later; whatever fails on the way is a 503, never a dangling request. */
export const makeLater = (deps: Pick<MediaDeps, "onError">) => (answer: DeferredAnswer, work: () => Promise<void>) => {
  work().catch((error) => {
    deps.onError(error)
    if (!answer.aborted) {
      try {
        unavailableNow(answer)
      } catch {
        // Already ended.
      }
    }
  })
}

export type Later = ReturnType<typeof makeLater>
