import { Config, Duration, Effect, Layer, Option, Schedule } from "effect"
import { DomainRepo } from "../../domain/ports/DomainRepo.js"
import { Domains } from "../api/Domains/Domains.js"

export interface DomainSweepOptions {
  /** A verified domain is checked again once its last check is this old. */
  readonly recheckMs: number
  /** A proof missing longer than this takes the domain back to pending (its host stops serving). */
  readonly graceMs: number
  /** How often the sweep looks for domains due. */
  readonly sweepMs: number
  /** Domains checked per pass (each a DNS lookup, within the pass's transaction). */
  readonly batch: number
}

const ms = (name: string, fallback: number, min: number) =>
  Config.integer(name).pipe(
    Config.validate({
      message: `must be a whole number of milliseconds, at least ${min}`,
      validation: (n) => n >= min
    }),
    Config.withDefault(fallback)
  )

/** DOMAIN_RECHECK_MS (default 6 h), DOMAIN_PROOF_GRACE_MS (72 h), DOMAIN_SWEEP_MS (60 s). */
export const domainSweepConfig: Config.Config<DomainSweepOptions> = Config.all({
  recheckMs: ms("DOMAIN_RECHECK_MS", 6 * 3_600_000, 100),
  graceMs: ms("DOMAIN_PROOF_GRACE_MS", 72 * 3_600_000, 0),
  sweepMs: ms("DOMAIN_SWEEP_MS", 60_000, 50),
  batch: Config.succeed(50)
})

/**
 * One pass: if no other process is sweeping (PostgreSQL advisory lock, held for the pass's
 * transaction), re-checks the verified domains whose last check is older than `recheckMs`,
 * oldest first; each outcome and its event commit with the pass. Restart-safe: what is due is
 * read from the table every time, and a pass cut short rolls back and is simply done again.
 * The number of domains checked, or None when another process holds the lock.
 */
export const sweepOnce = (options: DomainSweepOptions) =>
  Effect.gen(function* () {
    const repo = yield* DomainRepo
    const domains = yield* Domains
    return yield* repo.whileSweeping(
      Effect.gen(function* () {
        const due = yield* repo.dueForRecheck(new Date(Date.now() - options.recheckMs), options.batch)
        for (const d of due) yield* domains.recheck(d, options.graceMs)
        return due.length
      })
    )
  }).pipe(Effect.withSpan("DomainSweep.pass"))

/** The sweep, every `sweepMs` while its scope lives; a failed pass is logged and tried again. */
export const domainSweepLayer = (options: DomainSweepOptions) =>
  Layer.scopedDiscard(
    sweepOnce(options).pipe(
      Effect.tap((checked) =>
        Option.isSome(checked) && checked.value > 0
          ? Effect.logDebug(`domain re-verification: ${checked.value} checked`)
          : Effect.void
      ),
      Effect.catchAllCause((cause) => Effect.logWarning("domain re-verification pass failed", cause)),
      Effect.repeat(Schedule.spaced(Duration.millis(options.sweepMs))),
      Effect.forkScoped
    )
  )

/** The sweep with its settings from the environment. Needs Domains and DomainRepo. */
export const DomainSweepLive = Layer.unwrapEffect(Effect.map(domainSweepConfig, domainSweepLayer))
