import { Config, ConfigError, Context, Data, Effect, Either, Layer, ParseResult, Schema } from "effect"
import {
  DEFAULT_PLAN,
  DEFAULT_PLANS,
  mergePlans,
  type PlanLimits,
  PlanOverrides,
  type PlanTable
} from "../domain/Plan.js"

export class UnknownPlan extends Data.TaggedError("UnknownPlan")<{
  readonly plan: string
  readonly known: ReadonlyArray<string>
}> {
  override get message() {
    return `unknown plan '${this.plan}'; known plans: ${this.known.join(", ")}`
  }
}

const decodeOverrides = Schema.decodeUnknownEither(PlanOverrides)

/** `PLANS` as text -> the plan table, or why not (one line). */
export const parsePlans = (text: string): Either.Either<PlanTable, string> => {
  if (text.trim() === "") return Either.right(DEFAULT_PLANS)
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    return Either.left(`must be JSON (${e instanceof Error ? e.message : String(e)})`)
  }
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    return Either.left('must be a JSON object of plan name -> fields, e.g. {"free":{"links_per_month":500}}')
  }
  return decodeOverrides(json).pipe(
    Either.mapLeft((error) =>
      ParseResult.ArrayFormatter.formatErrorSync(error)
        .map((issue) => `${issue.path.map(String).join(".") || "(root)"}: ${issue.message}`)
        .join("; ")
    ),
    Either.map((overrides) => mergePlans(overrides))
  )
}

/**
 * `PLANS`: JSON, a partial plan per plan name merged over the built-in table (new names
 * allowed). Unset or empty: the built-in table. Validation sits on the variable itself, so a
 * failure names it.
 */
export const plansConfig: Config.Config<PlanTable> = Config.string("PLANS").pipe(
  Config.mapOrFail((text) =>
    // One line whatever the parser said: start-up failures are one line naming the variable.
    Either.mapLeft(parsePlans(text), (message) => ConfigError.InvalidData([], message.replace(/\s+/g, " ")))
  ),
  Config.withDefault(DEFAULT_PLANS)
)

export interface PlansShape {
  readonly table: PlanTable
  /** Plan names, defaults first. */
  readonly names: ReadonlyArray<string>
  /**
   * The limits of a plan. An account whose plan is no longer in the table (removed from
   * PLANS) gets the default plan's.
   */
  readonly limits: (plan: string) => PlanLimits
  /** The plan name if the table knows it. */
  readonly check: (plan: string) => Effect.Effect<string, UnknownPlan>
}

const make = (table: PlanTable): PlansShape => {
  const byName = new Map(Object.entries(table))
  const fallback = table[DEFAULT_PLAN] ?? DEFAULT_PLANS[DEFAULT_PLAN]!
  const names = [...byName.keys()]
  return {
    table,
    names,
    limits: (plan) => byName.get(plan) ?? fallback,
    check: (plan) => (byName.has(plan) ? Effect.succeed(plan) : Effect.fail(new UnknownPlan({ plan, known: names })))
  }
}

/** The plan table, read once at start. */
export class Plans extends Context.Tag("Plans")<Plans, PlansShape>() {
  /** From `PLANS` (a bad value stops start-up with a configuration error naming PLANS). */
  static readonly layer = Layer.effect(Plans, Effect.map(plansConfig, make))
  /** A fixed table: the defaults with these overrides merged over them (tests, tools). */
  static readonly make = (overrides: Record<string, Partial<PlanLimits>> = {}) =>
    Layer.succeed(Plans, make(mergePlans(overrides)))
}
