import { describe, expect, it } from "vitest"
import { type NsfwScores, ratingOf, THRESHOLDS, usableScores } from "../../domain/Classification.js"

/** Scores with the rest of the mass on Neutral. */
const scores = (s: Partial<Omit<NsfwScores, "Neutral">>): NsfwScores => {
  const drawing = s.Drawing ?? 0
  const hentai = s.Hentai ?? 0
  const porn = s.Porn ?? 0
  const sexy = s.Sexy ?? 0
  return { Drawing: drawing, Hentai: hentai, Porn: porn, Sexy: sexy, Neutral: 1 - drawing - hentai - porn - sexy }
}

describe("classifier policy (nsfwjs classes -> rating)", () => {
  it("neutral photos and drawings are general", () => {
    expect(ratingOf(scores({}))).toBe("general")
    expect(ratingOf(scores({ Drawing: 0.95 }))).toBe("general")
    expect(ratingOf(scores({ Drawing: 0.6, Hentai: 0.1, Porn: 0.05, Sexy: 0.1 }))).toBe("general")
  })

  it("explicit (Porn + Hentai) at or above 0.5 is nsfw", () => {
    expect(THRESHOLDS.nsfwExplicit).toBe(0.5)
    expect(ratingOf(scores({ Porn: 0.5 }))).toBe("nsfw")
    expect(ratingOf(scores({ Hentai: 0.9 }))).toBe("nsfw")
    expect(ratingOf(scores({ Porn: 0.3, Hentai: 0.25 }))).toBe("nsfw")
    expect(ratingOf(scores({ Porn: 0.49 }))).toBe("sensitive")
  })

  it("uncertain explicit content (Porn + Hentai from 0.2) is sensitive, not general", () => {
    expect(ratingOf(scores({ Porn: 0.2 }))).toBe("sensitive")
    expect(ratingOf(scores({ Porn: 0.1, Hentai: 0.1 }))).toBe("sensitive")
    expect(ratingOf(scores({ Porn: 0.19 }))).toBe("general")
  })

  it("suggestive content (Sexy from 0.4) is sensitive", () => {
    expect(ratingOf(scores({ Sexy: 0.4 }))).toBe("sensitive")
    expect(ratingOf(scores({ Sexy: 0.95 }))).toBe("sensitive")
    expect(ratingOf(scores({ Sexy: 0.39 }))).toBe("general")
  })

  it("explicit and suggestive together from 0.5 are sensitive", () => {
    expect(ratingOf(scores({ Sexy: 0.35, Porn: 0.15 }))).toBe("sensitive")
    expect(ratingOf(scores({ Sexy: 0.3, Porn: 0.15 }))).toBe("general")
  })

  it("a strongly sexy image with explicit mass past 0.5 is nsfw, explicit wins over suggestive", () => {
    expect(ratingOf(scores({ Sexy: 0.45, Porn: 0.55 }))).toBe("nsfw")
  })

  it("only complete probability vectors are usable answers", () => {
    expect(usableScores({ Drawing: 0.1, Hentai: 0.1, Neutral: 0.6, Porn: 0.1, Sexy: 0.1 })).toBeDefined()
    // a class missing
    expect(usableScores({ Drawing: 0.2, Hentai: 0.1, Neutral: 0.6, Porn: 0.1 })).toBeUndefined()
    // not a number, NaN, out of range
    expect(usableScores({ Drawing: "0.2", Hentai: 0.1, Neutral: 0.5, Porn: 0.1, Sexy: 0.1 })).toBeUndefined()
    expect(usableScores({ Drawing: Number.NaN, Hentai: 0.1, Neutral: 0.7, Porn: 0.1, Sexy: 0.1 })).toBeUndefined()
    expect(usableScores({ Drawing: -0.1, Hentai: 0.2, Neutral: 0.7, Porn: 0.1, Sexy: 0.1 })).toBeUndefined()
    // not summing to 1
    expect(usableScores({ Drawing: 0.5, Hentai: 0.5, Neutral: 0.5, Porn: 0.1, Sexy: 0.1 })).toBeUndefined()
    expect(usableScores({ Drawing: 0, Hentai: 0, Neutral: 0, Porn: 0, Sexy: 0 })).toBeUndefined()
  })
})
