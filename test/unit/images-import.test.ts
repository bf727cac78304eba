import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { SourceFailed, UrlNotAllowed } from "../../domain/Errors.js"
import {
  RedirectNotAllowed,
  SourceForbidden,
  SourceRejected,
  SourceTooLarge,
  SourceUnreachable
} from "../../domain/ports/SafeFetcher.js"
import { emptyWorld, PNG, principal, withImages } from "../support/imagePorts.js"

// URL imports of the Images service over in-memory ports: the fetch, its failures and what
// the response must be.

const owner = principal()

describe("Images.importUrl", () => {
  const fetched = (body: Uint8Array, headers: Record<string, string> = {}) =>
    Either.right({ finalUrl: "https://example.com/a.png", status: 200, headers, body })

  it.effect("an image the source answers with becomes a processing image with its source URL", () =>
    Effect.gen(function* () {
      const world = emptyWorld()
      world.fetch = fetched(PNG, { "content-type": "image/png" })
      const row = yield* withImages(world, (images) => images.importUrl(owner, "https://example.com/a.png", "nsfw"))
      expect([row.status, row.sourceUrl, row.rating]).toEqual(["processing", "https://example.com/a.png", "nsfw"])
      expect(world.blobs.size).toBe(1)
    })
  )

  it.effect("only http and https URLs are fetched: another scheme is UrlNotAllowed", () =>
    Effect.gen(function* () {
      const world = emptyWorld()
      const error = yield* withImages(world, (images) =>
        Effect.flip(images.importUrl(owner, "ftp://example.com/a.png", undefined))
      )
      expect(error).toEqual(
        new UrlNotAllowed({
          message: "The URL is not allowed for a server-side fetch.",
          reason: "url: scheme ftp: is not http or https"
        })
      )
    })
  )

  it.effect("a failed fetch is the domain's failure for its kind", () =>
    Effect.gen(function* () {
      const cases = [
        [
          new UrlNotAllowed({ reason: "a private address" }),
          new UrlNotAllowed({
            message: "The URL is not allowed for a server-side fetch.",
            reason: "url: a private address"
          })
        ],
        [
          new RedirectNotAllowed({ location: "http://10.0.0.1/", reason: "a private address" }),
          new SourceFailed({
            kind: "redirect_not_allowed",
            message: "The source redirected where a server-side fetch may not go.",
            detail: "redirect to http://10.0.0.1/: a private address"
          })
        ],
        [
          new SourceTooLarge({ limit: 10 }),
          new SourceFailed({
            kind: "source_too_large",
            message: "The source's response is larger than the image file limit.",
            detail: "the response is larger than 10 bytes"
          })
        ],
        [new SourceForbidden({ url: "https://example.com/" }), "source_forbidden"],
        [
          new SourceUnreachable({ reason: "the name did not resolve" }),
          new SourceFailed({
            kind: "source_unreachable",
            message: "The source gave no usable answer.",
            detail: "the name did not resolve"
          })
        ],
        [
          new SourceRejected({ status: 404 }),
          new SourceFailed({
            kind: "source_unreachable",
            message: "The source gave no usable answer.",
            detail: "the source answered 404"
          })
        ]
      ] as const
      for (const [failure, expected] of cases) {
        const world = emptyWorld()
        world.fetch = Either.left(failure)
        const error = yield* withImages(world, (images) =>
          Effect.flip(images.importUrl(owner, "https://example.com/", undefined))
        )
        if (typeof expected === "string") expect(error).toMatchObject({ _tag: "SourceFailed", kind: expected })
        else expect(error).toEqual(expected)
      }
    })
  )

  it.effect("a response that is no image is SourceFailed not_an_image naming what it looks like and its type", () =>
    Effect.gen(function* () {
      const world = emptyWorld()
      world.fetch = fetched(new TextEncoder().encode("<html><body>a post</body></html>"), {
        "content-type": "text/html"
      })
      const page = yield* withImages(world, (images) =>
        Effect.flip(images.importUrl(owner, "https://example.com/", undefined))
      )
      expect(page).toEqual(
        new SourceFailed({
          kind: "not_an_image",
          message: "The source's response is not an image.",
          detail:
            "the bytes are not a JPEG, PNG, WebP or GIF image: they are an HTML page (Content-Type text/html); give the URL of the image file itself"
        })
      )
      world.fetch = fetched(new Uint8Array())
      const empty = yield* withImages(world, (images) =>
        Effect.flip(images.importUrl(owner, "https://example.com/", undefined))
      )
      expect(empty).toMatchObject({ kind: "not_an_image", detail: "the response is empty" })
      expect(world.db.images.size + world.blobs.size).toBe(0)
    })
  )
})
