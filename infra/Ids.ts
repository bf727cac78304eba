import { randomBytes, randomInt } from "node:crypto"
import { Effect, Option } from "effect"

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** Uniform random base62 string from the system CSPRNG (rejection-free via randomInt). */
export const randomBase62 = (length: number): string => {
  let out = ""
  for (let i = 0; i < length; i++) out += ALPHABET[randomInt(62)]
  return out
}

/** 128 bits of randomness: unguessable ids for records. */
export const newId = (prefix: string): string => `${prefix}_${randomBase62(22)}`

/** Short-link slugs: 7 base62 characters (about 41 bits); collisions are retried by the caller. */
export const newSlug = (): string => randomBase62(7)

export const newSecret = (): string => randomBytes(32).toString("base64url")

export const newRequestId = (): string => `req_${randomBase62(20)}`

/**
 * Draws random values until the store takes one: `attempt` draws a fresh one each time and
 * answers None when it is taken (a rare collision). After `attempts` draws it is a defect.
 */
export const firstFree = <A, E, R>(
  attempt: Effect.Effect<Option.Option<A>, E, R>,
  what: string,
  attempts = 8
): Effect.Effect<A, E, R> =>
  attempt.pipe(
    Effect.repeat({ until: Option.isSome, times: attempts - 1 }),
    Effect.flatMap(
      Option.match({ onNone: () => Effect.dieMessage(`could not allocate a free ${what}`), onSome: Effect.succeed })
    )
  )
