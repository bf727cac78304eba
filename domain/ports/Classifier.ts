/**
 * The content classifier port: the published bytes of an image (WebP or GIF) in, a rating
 * out. Adapters: nsfwjs on TensorFlow.js WASM in a niced child process (the default), an
 * HTTP service, and `none` (nothing is classified: images stay `unrated`).
 */
import { Context, Data, type Effect } from "effect"
import type { DeclaredRating } from "../Image.js"

export interface Classification {
  readonly rating: DeclaredRating
  /** What the model said, per class (nsfwjs: Drawing, Hentai, Neutral, Porn, Sexy); may be empty. */
  readonly scores: Readonly<Record<string, number>>
}

/**
 * No usable answer: the classifier is unavailable, timed out, busy, or answered something
 * that is not a rating. The caller may retry; the image stays `unrated` meanwhile.
 */
export class ClassifierError extends Data.TaggedError("ClassifierError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

export interface ClassifierShape {
  /** For the audit trail (`classifier:<name>`) and logs: "nsfwjs", "http", "none". */
  readonly name: string
  /** False for `none`: the classification worker then does not run. */
  readonly enabled: boolean
  readonly classify: (bytes: Uint8Array) => Effect.Effect<Classification, ClassifierError>
}

export class Classifier extends Context.Tag("Classifier")<Classifier, ClassifierShape>() {}
