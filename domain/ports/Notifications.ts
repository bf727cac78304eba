import { Context, type Effect, type Scope } from "effect"

export interface NotificationsShape {
  /**
   * Hears the notifications sent on `channel` for as long as the scope lives, handing each
   * payload to `onPayload` (re-listening after a failure). Returns once notifications arrive,
   * so none sent after it returns is missed, or after about two seconds at most: a
   * notification is a prompt, callers poll for what they may miss.
   */
  readonly listen: (channel: string, onPayload: (payload: string) => void) => Effect.Effect<void, never, Scope.Scope>
}

/** Wake-ups between processes (PostgreSQL LISTEN/NOTIFY). */
export class Notifications extends Context.Tag("Notifications")<Notifications, NotificationsShape>() {}
