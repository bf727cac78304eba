import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { Deferred, Effect, Fiber, Layer, Option, Schedule, Scope, Stream } from "effect"
import { Notifications } from "../../domain/ports/Notifications.js"

/**
 * @effect/sql-pg runs every LISTEN and UNLISTEN of a client on one shared connection. Two at
 * once queue a query on a busy pg client, which pg deprecates (a warning on stderr, outside
 * the JSON log). One permit per process: a LISTEN holds it until it is in effect (its probe
 * came back), an UNLISTEN (the listener's interruption) until it is done.
 */
const oneAtATime = Effect.unsafeMakeSemaphore(1)

/**
 * LISTENs on a channel for as long as the scope lives (re-listening after a failure) and
 * returns true once notifications arrive, so that none sent after it returns is missed. Gives
 * up waiting after about two seconds (false, with a warning): the callers poll as well.
 * `onLost` runs whenever the listening connection was lost (notifications may have been
 * missed meanwhile).
 */
export const listenInBackground = (
  sql: PgClient.PgClient,
  channel: string,
  scope: Scope.Scope,
  onPayload: (payload: string) => void,
  onLost: () => void = () => {}
) =>
  oneAtATime.withPermits(1)(
    Effect.gen(function* () {
      const ready = yield* Deferred.make<void>()
      const probe = `probe:${randomUUID()}`
      const fiber = yield* sql.listen(channel).pipe(
        Stream.runForEach((payload) =>
          payload === probe ? Deferred.succeed(ready, undefined) : Effect.sync(() => onPayload(payload))
        ),
        Effect.ensuring(Effect.sync(onLost)),
        Effect.tapError((e) => Effect.logWarning(`LISTEN ${channel} failed; polling until it is back`, e)),
        Effect.retry(Schedule.spaced("1 second")),
        Effect.forkDaemon
      )
      yield* Scope.addFinalizer(scope, oneAtATime.withPermits(1)(Fiber.interrupt(fiber)))
      // pg_notify, not sql.notify: @effect/sql-pg 0.53 sends `NOTIFY channel, $1`, which
      // PostgreSQL refuses (a payload must be a literal), so every probe failed and each
      // LISTEN waited the whole two seconds.
      const confirmed = yield* sql`SELECT pg_notify(${channel}, ${probe})`.pipe(
        Effect.ignore,
        Effect.zipRight(Deferred.await(ready).pipe(Effect.timeoutOption(100))),
        Effect.repeat({ until: Option.isSome, times: 20 }),
        Effect.map(Option.isSome)
      )
      if (!confirmed) yield* Effect.logWarning(`LISTEN ${channel} not confirmed within 2 s; polling meanwhile`)
      return confirmed
    })
  )

/** LISTEN/NOTIFY of PostgreSQL over the client's listening connection. */
export const NotificationsLive: Layer.Layer<Notifications, never, PgClient.PgClient> = Layer.effect(
  Notifications,
  Effect.map(PgClient.PgClient, (sql) =>
    Notifications.of({
      listen: (channel, onPayload) =>
        Effect.flatMap(Effect.scope, (scope) => listenInBackground(sql, channel, scope, onPayload))
    })
  )
)
