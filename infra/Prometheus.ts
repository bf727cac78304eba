import { Effect, Metric, MetricState, Option, type Scope } from "effect"
import type { MetricPair } from "effect/MetricPair"

/**
 * Effect's metrics (`Metric.snapshot`) in Prometheus' text exposition format (0.0.4):
 * counters, gauges, histograms (cumulative buckets, `+Inf`, `_sum`, `_count`) and
 * frequencies (one counter per value, labelled `key`). Summaries are left out.
 */

const NAME = /[^a-zA-Z0-9_:]/g
const metricName = (name: string) => name.replace(NAME, "_")
const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"')
const labels = (pairs: ReadonlyArray<readonly [string, string]>) =>
  pairs.length === 0 ? "" : `{${pairs.map(([k, v]) => `${metricName(k)}="${escapeLabel(v)}"`).join(",")}}`
const num = (value: number | bigint) =>
  typeof value === "bigint" ? value.toString() : Number.isFinite(value) ? String(value) : value > 0 ? "+Inf" : "-Inf"

interface Family {
  type: string
  help: string | undefined
  lines: Array<string>
}

const sampleLines = (name: string, tags: ReadonlyArray<readonly [string, string]>, state: unknown) => {
  if (MetricState.isCounterState(state))
    return { type: "counter", lines: [`${name}${labels(tags)} ${num(state.count)}`] }
  if (MetricState.isGaugeState(state)) return { type: "gauge", lines: [`${name}${labels(tags)} ${num(state.value)}`] }
  if (MetricState.isHistogramState(state)) {
    const lines = [...state.buckets].map(
      ([bound, count]) => `${name}_bucket${labels([...tags, ["le", num(bound)]])} ${count}`
    )
    lines.push(`${name}_bucket${labels([...tags, ["le", "+Inf"]])} ${state.count}`)
    lines.push(`${name}_sum${labels(tags)} ${num(state.sum)}`, `${name}_count${labels(tags)} ${state.count}`)
    return { type: "histogram", lines }
  }
  if (MetricState.isFrequencyState(state)) {
    const lines = [...state.occurrences].map(([key, count]) => `${name}${labels([...tags, ["key", key]])} ${count}`)
    return { type: "counter", lines }
  }
  return undefined
}

/** The exposition text of the given metric pairs. */
export const renderMetrics = (pairs: ReadonlyArray<MetricPair.Untyped>): string => {
  const families = new Map<string, Family>()
  for (const pair of pairs) {
    const name = metricName(pair.metricKey.name)
    const tags = pair.metricKey.tags.map((t) => [t.key, t.value] as const)
    const sample = sampleLines(name, tags, pair.metricState)
    if (sample === undefined) continue
    const family = families.get(name) ?? {
      type: sample.type,
      help: Option.getOrUndefined(pair.metricKey.description),
      lines: []
    }
    family.lines.push(...sample.lines)
    families.set(name, family)
  }
  const out: Array<string> = []
  for (const [name, family] of [...families].sort(([a], [b]) => a.localeCompare(b))) {
    if (family.help !== undefined) out.push(`# HELP ${name} ${family.help.replace(/\n/g, " ")}`)
    out.push(`# TYPE ${name} ${family.type}`, ...family.lines)
  }
  return `${out.join("\n")}\n`
}

/**
 * Collectors run before every rendering: they bring into Effect's registry what is counted
 * elsewhere with plain numbers (the redirector's hot path, pool sizes), so that counting costs
 * no Effect allocation per request.
 */
const collectors = new Set<Effect.Effect<void>>()

/** Runs `collect` before every rendering for as long as the scope lives; `last` when it closes. */
const addCollector = (
  collect: Effect.Effect<void>,
  last: Effect.Effect<void>
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => void collectors.add(collect)),
    () =>
      Effect.ensuring(
        last,
        Effect.sync(() => collectors.delete(collect))
      )
  )

/**
 * Feeds `counter`, before every rendering and while the scope lives, with what a plain,
 * ever-growing number went up by since the last time: several sources add up in one counter,
 * and a source that stops leaves its count behind (collected once more as it stops).
 */
export const counterSource = (
  counter: Metric.Metric.Counter<number>,
  read: () => number
): Effect.Effect<void, never, Scope.Scope> => {
  let seen = 0
  const collect = Effect.suspend(() => {
    const now = read()
    const delta = now - seen
    seen = now
    return Metric.incrementBy(counter, delta)
  })
  return addCollector(collect, collect)
}

/**
 * Feeds `gauge` with a plain number read before every rendering, while the scope lives:
 * several sources add up, and a source that stops takes its part away.
 */
export const gaugeSource = (
  gauge: Metric.Metric.Gauge<number>,
  read: () => number
): Effect.Effect<void, never, Scope.Scope> => {
  let seen = 0
  const move = (to: number) =>
    Effect.suspend(() => {
      const delta = to - seen
      seen = to
      return Metric.incrementBy(gauge, delta)
    })
  return addCollector(
    Effect.suspend(() => move(read())),
    Effect.suspend(() => move(0))
  )
}

/** The process's metrics now, as exposition text (after the collectors ran). */
export const prometheusText: Effect.Effect<string> = Effect.suspend(() =>
  Effect.zipRight(Effect.all([...collectors], { discard: true }), Effect.map(Metric.snapshot, renderMetrics))
)

/** The content type of the exposition format. */
export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
