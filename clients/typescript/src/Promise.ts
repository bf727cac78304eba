import type { HttpClientResponse } from "@effect/platform"
import { Effect, Either, ManagedRuntime } from "effect"
import { type Client, ClientLive, type ClientOptions, makeClient, withIdempotencyKey } from "./Client.js"
import { ApiError, isErrorBody } from "./Errors.js"

/**
 * The Promise facade for callers who do not use Effect: the same operations, grouped the same
 * way, each returning a Promise. An error answer of the API rejects with `ApiError` (`code`,
 * `requestId`, `detail`); a transport failure rejects with the platform's error.
 * Built by walking the Effect client, so every operation of the Api is here.
 */

/** Per call: the Idempotency-Key of a write (default: a fresh one). */
export interface CallOptions {
  readonly idempotencyKey?: string
}

/** An operation of the Effect client as a Promise, with the call options after its request. */
type PromiseOperation<F> = F extends (...args: infer Args) => Effect.Effect<infer A, unknown, unknown>
  ? // The operation is generic in `withResponse`; the facade answers with the body alone.
    (...args: [...Args, CallOptions?]) => Promise<Exclude<A, readonly [unknown, HttpClientResponse.HttpClientResponse]>>
  : never

/** Every group of the client, every operation a Promise. */
export type PromiseClient = {
  readonly [G in keyof Client as Client[G] extends Record<string, unknown> ? G : never]: {
    readonly [O in keyof Client[G]]: PromiseOperation<Client[G][O]>
  }
} & {
  /** Ends the client's runtime. */
  readonly close: () => Promise<void>
}

type AnyOperation = (input?: unknown) => Effect.Effect<unknown, unknown>

/** A client whose operations return Promises. */
export const createClient = async (options: ClientOptions): Promise<PromiseClient> => {
  const runtime = ManagedRuntime.make(ClientLive)
  const client = (await runtime.runPromise(makeClient(options))) as unknown as Record<
    string,
    Record<string, AnyOperation>
  >
  const call = async (operation: AnyOperation, input: unknown, callOptions: CallOptions | undefined) => {
    let effect = operation(input)
    if (callOptions?.idempotencyKey !== undefined) effect = withIdempotencyKey(callOptions.idempotencyKey)(effect)
    const result = await runtime.runPromise(Effect.either(effect))
    if (Either.isRight(result)) return result.right
    throw isErrorBody(result.left) ? new ApiError(result.left) : result.left
  }
  const groups = Object.fromEntries(
    Object.entries(client)
      .filter(([, group]) => typeof group === "object" && group !== null)
      .map(([name, group]) => [
        name,
        Object.fromEntries(
          Object.entries(group).map(([operation, fn]) => [
            operation,
            (input?: unknown, callOptions?: CallOptions) => call(fn, input, callOptions)
          ])
        )
      ])
  )
  return { ...groups, close: () => runtime.dispose() } as unknown as PromiseClient
}
