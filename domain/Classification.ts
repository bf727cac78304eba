import type { DeclaredRating } from "./Image.js"

/**
 * The content classifier's policy: how the five nsfwjs class probabilities become a rating.
 * Pure: no model, no I/O.
 *
 * - nsfw: explicit (Porn + Hentai) ≥ 0.5: the model thinks explicit content more likely than not.
 * - sensitive: explicit ≥ 0.2, or Sexy ≥ 0.4, or explicit + Sexy ≥ 0.5: suggestive, or explicit
 *   content the model is not sure of. The classifier is wrong about one image in ten, so an
 *   uncertain image goes to the stricter side.
 * - general: everything else (Neutral and Drawing dominate).
 */
export const NSFW_CLASSES = ["Drawing", "Hentai", "Neutral", "Porn", "Sexy"] as const
export type NsfwClass = (typeof NSFW_CLASSES)[number]
export type NsfwScores = Readonly<Record<NsfwClass, number>>

export const THRESHOLDS = {
  /** Porn + Hentai at or above this: nsfw. */
  nsfwExplicit: 0.5,
  /** Porn + Hentai at or above this (and below nsfwExplicit): sensitive. */
  sensitiveExplicit: 0.2,
  /** Sexy at or above this: sensitive. */
  sensitiveSexy: 0.4,
  /** Porn + Hentai + Sexy at or above this: sensitive. */
  sensitiveCombined: 0.5
} as const

/** How far the five probabilities may sum away from 1 and still be a usable answer. */
const SUM_TOLERANCE = 0.02

/**
 * The scores when they are a usable answer: every class present, each a finite number in
 * [0, 1], summing to 1 within a small tolerance; undefined otherwise (the image stays unrated).
 */
export const usableScores = (scores: Readonly<Record<string, unknown>>): NsfwScores | undefined => {
  const out: Partial<Record<NsfwClass, number>> = {}
  let sum = 0
  for (const name of NSFW_CLASSES) {
    const p = scores[name]
    if (typeof p !== "number" || !Number.isFinite(p) || p < 0 || p > 1) return undefined
    out[name] = p
    sum += p
  }
  return Math.abs(sum - 1) <= SUM_TOLERANCE ? (out as NsfwScores) : undefined
}

export const ratingOf = (scores: NsfwScores): DeclaredRating => {
  const explicit = scores.Porn + scores.Hentai
  if (explicit >= THRESHOLDS.nsfwExplicit) return "nsfw"
  if (
    explicit >= THRESHOLDS.sensitiveExplicit ||
    scores.Sexy >= THRESHOLDS.sensitiveSexy ||
    explicit + scores.Sexy >= THRESHOLDS.sensitiveCombined
  ) {
    return "sensitive"
  }
  return "general"
}
