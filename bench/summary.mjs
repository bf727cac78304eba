// What the redirect benchmarks' summaries share: the `node --input-type=module -e` at the end
// of each (bench/redirect.sh, redirect-scale.sh, redirect-ab.sh, redirect-costs.sh,
// redirect-parallel.sh) imports it, run from the repository's root as the scripts are.
//
//   import { median, fixed, slicedRounds } from "./bench/summary.mjs"

/** The middle value of `xs` (of an even count, the lower of the two middles), `xs` left as it is. */
export const median = (xs) => [...xs].sort((x, y) => x - y)[(xs.length - 1) >> 1]

/** `x` rounded to `digits` decimals, as a number (for a benchmark's JSON line). */
export const fixed = (x, digits) => Number(x.toFixed(digits))

/**
 * A run's rounds of slices, each a JSON object of phase name to its round (bench/lib.sh
 * slices_round: requests, rps, slices_rps, the ticks, hz), and what is read from them.
 */
export const slicedRounds = (runs) => {
  const rounds = runs.map((s) => JSON.parse(s))
  return {
    rounds,
    /** Phase `a`'s requests a second over `b`'s, the median of the rounds' ratios. */
    ratio: (a, b) => median(rounds.map((r) => r[a].rps / r[b].rps)),
    /** Each round's ratio of `a` over `b`, for people. */
    list: (a, b) => rounds.map((r) => (r[a].rps / r[b].rps).toFixed(3)).join(", "),
    /** The same ratio slice by slice (the two phases of a slice pair ran next to each other). */
    pairs: (a, b) => rounds.flatMap((r) => r[a].slices_rps.map((x, i) => x / r[b].slices_rps[i])),
    /** Phase `a`'s requests a second, the median of the rounds. */
    rps: (a) => median(rounds.map((r) => r[a].rps)),
    /** Phase `a`'s CPU a request by `field` (ticks: the server's by default), in µs, the median of the rounds. */
    cpuUs: (a, field = "server_ticks") => median(rounds.map((r) => ((r[a][field] / r[a].hz) * 1e6) / r[a].requests))
  }
}
