/** The click projector's fixed settings: its consumer group, batch and insert sizes, linger. */

export const PROJECTOR_GROUP = "analytics-projector"
/** Records per partition batch handed to the projector. */
export const PROJECTOR_MAX_BATCH = 2_000
/** Clicks per insert at most: large inserts keep parts few; far below the store's per-insert ceiling. */
export const PROJECTOR_MAX_ROWS = 50_000
/**
 * While the projector keeps up, it inserts into a partition at most once per this period:
 * each insert costs the engine ~9 ms of CPU whatever its size (a part, the view, merges), so
 * under load the clicks of a period are better taken in one insert than in many small ones.
 * A batch that comes sooner than that after the partition's last insert waits out the rest
 * (the other partitions' batches taken after it hold what arrived meanwhile). A quiet
 * partition's click goes in at once; a full batch means the projector is behind, and it goes
 * on at once. Delays a click by at most about this much.
 */
export const PROJECTOR_LINGER_MS = 500
/** How many recent event ids per partition are remembered to drop a producer's retried duplicates. */
export const RECENT_IDS = 20_000
