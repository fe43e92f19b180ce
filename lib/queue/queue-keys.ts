import { taggedKey } from '../redis/tagged-key';

// The checks of queue names and ids, shared with the option checks, live below both.
export { checkNameBytes, checkQueueName } from '../options/queue-limits';

/** The Redis keys of one queue; all share one hash tag, so one Cluster slot. */
export interface QueueRedisKeys {
  /** The queue name as the user gave it. */
  name: string;
  /** ZSET id -> due time (ms): ready (due <= now) and delayed tasks together. */
  due: string;
  /** ZSET id -> lease expiry (ms). */
  leased: string;
  /** HASH id -> JSON payload. */
  payload: string;
  /** HASH id -> number of claims so far. */
  attempts: string;
  /** HASH id -> lease token of the current lease. */
  tokens: string;
  /** ZSET id -> time of death (ms). */
  dead: string;
  /** LIST holding at most one wake-up marker; idle workers block on it. */
  wake: string;
  /** HASH id -> 'enqueuedAt', or 'enqueuedAt|dueAt|priority|seq|group' for other tasks. */
  info: string;
  /** HASH id -> message of the last failure. */
  errors: string;
  /** ZSET id -> due time of delayed tasks with a priority or a group. */
  pending: string;
  /** ZSET id -> (priority + 1000) * 2^41 + seq: ready tasks with a priority. */
  prio: string;
  /** ZSET of 'group \0 seq \0 id' (all scores 0): ready grouped tasks, by group then order. */
  gtasks: string;
  /** ZSET group -> turn: groups with ready tasks, served round-robin. */
  ring: string;
  /** HASH group -> tasks of the group leased now. */
  gactive: string;
  /** ZSET group -> time its next task may start (retry backoff, group limiter). */
  gpark: string;
  /** HASH group -> 'windowEnd|count' of the group limiter. */
  glimit: string;
  /** ZSET lease -> time granted: the queue limiter's sliding window. */
  limiter: string;
  /** HASH of queue-wide settings: 'paused', 'concurrency'. */
  config: string;
  /** ZSET id -> end of its keepCompleted window. */
  done: string;
  /** STRING counter: enqueue sequence of tasks with a priority or a group. */
  seq: string;
  /**
   * STREAM of the queue's events, capped (`queue.eventsMaxLen`): one entry per change, written by
   * the script that makes it. Fields: t type, i task id, a attempt, r result (JSON), e error
   * (JSON `{name, message, stack?}`), p progress (JSON), d delay (ms).
   */
  events: string;
  /** HASH id -> 'finishedAt|result JSON' of completed tasks kept by `keepCompleted`. */
  results: string;
  /** HASH id -> JSON of the last `task.progress()` value. */
  progress: string;
  /** HASH id -> JSON of the task's own options (maxAttempts, backoff, timeoutMs). */
  opts: string;
  /** HASH id -> reason: cancel asked for a leased task, read by its worker (extend, settle). */
  cancels: string;
  /** ZSET id -> time it was cancelled (kept per `keepDead`). */
  cancelled: string;
  /** STRING 'ms n': the last enqueue's time and tasks placed in that ms (FIFO for same-ms ties). */
  ties: string;
  /** STRING: highest lease fence given out (`task.fence`). */
  fence: string;
  /** HASH id -> the task's log (`task.log`): its last lines, each JSON text, one per line. */
  logs: string;
  /** HASH deduplication id -> 'taskId|expiresAt' (0: until that task finishes). */
  dedup: string;
  /**
   * HASH running task id -> JSON of the last enqueue it deduplicated with `keepLastIfActive`
   * (`{dd, i, d, p?, o?}`), added when that task finishes.
   */
  dnext: string;
  /** ZSET flow parent id -> children still to finish: parents in `waiting-children`. */
  wchildren: string;
  /** HASH 'parentId \0 queue:childId' -> a child's outcome while its parent waits (flow.lua). */
  cdone: string;
  /** HASH flow parent id -> JSON of its children and, once it stopped waiting, their outcomes. */
  flow: string;
  /** HASH child id -> JSON link to its flow parent (queue, id, key base, onChildFailure). */
  parents: string;
  /** LIST of child outcomes still to apply to a parent in another slot (flow-apply.lua). */
  outbox: string;
  /** ZSET id -> time it expired: tasks not started by their `expiresAt` (kept per `keepCompleted`). */
  expired: string;
  /**
   * ZSET id -> `expiresAt` of tasks enqueued with one: where claim.lua looks for the waiting tasks
   * whose deadline passed (an index only: a task's own options, `"x"`, decide).
   */
  expiries: string;
  /**
   * HASH '<instanceId>#<n>' -> '<heartbeat ms>|<JSON>': the queue's workers on every instance
   * (workers.lua), each written again every heartbeat and dropped when it stops.
   */
  workers: string;
  /**
   * Prefix (not a key) of the queue's metrics: STRING `<metrics>:<UTC day>` per day, its
   * per-minute records (record-metrics.lua), expiring 14 days after the day.
   */
  metrics: string;
  /** Pub/sub channel (not a key; same hash tag): ids of leased tasks whose cancel was asked for. */
  cancelChannel: string;
}

/**
 * Keys of queue `name`: `<prefix>queue:{<name>}:<part>` (`encodeKeyName`). A name that already has
 * a `{tag}` keeps it (`<prefix>queue:<name>{}:<part>`), so that queues sharing a tag share a
 * Cluster slot; no name's keys can be another name's keys.
 */
export function queueRedisKeys(prefix: string, name: string): QueueRedisKeys {
  const base = taggedKey(prefix, 'queue', name);
  return {
    name,
    due: `${base}:due`,
    leased: `${base}:leased`,
    payload: `${base}:payload`,
    attempts: `${base}:attempts`,
    tokens: `${base}:tokens`,
    dead: `${base}:dead`,
    wake: `${base}:wake`,
    info: `${base}:info`,
    errors: `${base}:errors`,
    pending: `${base}:pending`,
    prio: `${base}:prio`,
    gtasks: `${base}:gtasks`,
    ring: `${base}:ring`,
    gactive: `${base}:gactive`,
    gpark: `${base}:gpark`,
    glimit: `${base}:glimit`,
    limiter: `${base}:limiter`,
    config: `${base}:config`,
    done: `${base}:done`,
    seq: `${base}:seq`,
    events: `${base}:events`,
    results: `${base}:results`,
    progress: `${base}:progress`,
    opts: `${base}:opts`,
    cancels: `${base}:cancels`,
    cancelled: `${base}:cancelled`,
    ties: `${base}:ties`,
    fence: `${base}:fence`,
    logs: `${base}:logs`,
    dedup: `${base}:dedup`,
    dnext: `${base}:dnext`,
    wchildren: `${base}:wchildren`,
    cdone: `${base}:cdone`,
    flow: `${base}:flow`,
    parents: `${base}:parents`,
    outbox: `${base}:outbox`,
    expired: `${base}:expired`,
    expiries: `${base}:expiries`,
    workers: `${base}:workers`,
    metrics: `${base}:metrics`,
    cancelChannel: `${base}:cancel`,
  };
}
