import type { AppEvent } from './app-client';

// The checker: it reads what every instance reported (stamped by the machine's monotonic clock)
// and finds what the lock promises against: two holders at once, a holder that learned of its
// loss only after the next holder was granted, a lost lock that came back, a fence the external
// FencedStore accepted from two different lock tokens, grants without a fence.

/** One grant as its holder saw it. */
export interface Hold {
  app: string;
  token: string;
  fence: number;
  /** When the holder's code started (the grant's reply arrived). */
  enter: number;
  /** Send time of the try that was granted (contenders only): a lower bound of the grant. */
  sentAt?: number;
  /** When its code stopped. */
  leave?: number;
  /** When its `lock.signal` aborted (lost). */
  abort?: number;
  /** The same moment by the real-time clock (epoch ms). */
  abortWall?: number;
  /** The external FencedStore's answer to its write: true, false, or an error name. */
  fenceOk?: boolean | string;
}

/** Two holders of different tokens inside at once. */
export interface Overlap {
  first: Hold;
  second: Hold;
  /** How long both were inside, in ms. */
  ms: number;
}

/** What the checker found in one scenario's events. */
export interface LockFindings {
  holds: number;
  overlaps: Overlap[];
  /**
   * Abort-before-grant margin per lost holder, in ms (positive: the holder knew first): the
   * earliest moment another holder could be granted (the lock's expiry in Redis, when `expiries`
   * has it) minus the moment the holder's signal aborted. Without a known expiry, the send time
   * of the contender's winning try stands for the grant (a lower bound of it). A holder that
   * never aborted before the next grant is an overlap.
   */
  margins: number[];
  /** `checked` reports where a lost lock answered isHeld() or release() true after the heal. */
  revived: AppEvent[];
  /** Fences the external FencedStore accepted from more than one token. */
  fencesTwice: Array<{ fence: number; tokens: string[] }>;
  /** Grants with fence 0 or whose fenced write was rejected as invalid. */
  unfenced: Hold[];
}

/** Builds each grant's hold from the events of every instance. */
export function holdsOf(events: readonly AppEvent[]): Hold[] {
  const holds = new Map<string, Hold>();
  for (const e of events) {
    if (e.ev === 'enter') {
      holds.set(e.token, {
        app: e.app,
        token: e.token,
        fence: e.fence,
        enter: e.t,
        ...(e.sentAt !== undefined ? { sentAt: e.sentAt } : {}),
      });
      continue;
    }
    const h = e.token === undefined ? undefined : holds.get(e.token);
    if (!h) continue;
    if (e.ev === 'leave') {
      h.leave ??= e.t;
      if (e.ok !== undefined) h.fenceOk = e.ok;
    } else if (e.ev === 'abort') h.abort ??= e.t;
    else if (e.ev === 'fenced') h.fenceOk = e.ok;
  }
  return [...holds.values()].sort((a, b) => a.enter - b.enter);
}

/** Until when a holder believed it held the lock: its abort or its leave, whichever came first. */
function endOf(h: Hold, end: number): number {
  return Math.min(h.abort ?? Infinity, h.leave ?? Infinity, end);
}

/**
 * Analyses the lock events of a scenario; `end` closes holds still open at its end; `expiries`
 * maps a lost holder's token to when its lock expired in Redis (epoch ms, real-time clock).
 */
export function checkLocks(
  events: readonly AppEvent[],
  end: number,
  expiries: ReadonlyMap<string, number> = new Map(),
): LockFindings {
  const holds = holdsOf(events);
  const overlaps: Overlap[] = [];
  // Sweep in enter order: every earlier hold still open when a hold enters overlaps it.
  const open: Hold[] = [];
  for (const h of holds) {
    for (let i = open.length - 1; i >= 0; i--) {
      const o = open[i];
      const oEnd = endOf(o, end);
      if (oEnd <= h.enter) open.splice(i, 1);
      else if (o.token !== h.token) {
        overlaps.push({ first: o, second: h, ms: Math.min(oEnd, endOf(h, end)) - h.enter });
      }
    }
    open.push(h);
  }

  const margins: number[] = [];
  for (const [i, h] of holds.entries()) {
    if (h.abort === undefined || (h.leave !== undefined && h.leave < h.abort)) continue;
    const expiry = expiries.get(h.token);
    if (expiry !== undefined && h.abortWall !== undefined) {
      margins.push(expiry - h.abortWall);
      continue;
    }
    const next = holds.slice(i + 1).find((n) => n.token !== h.token && n.app !== h.app);
    if (next?.sentAt !== undefined) margins.push(next.sentAt - h.abort);
  }

  const accepted = new Map<number, Set<string>>();
  for (const h of holds) {
    if (h.fenceOk !== true) continue;
    const tokens = accepted.get(h.fence) ?? new Set<string>();
    tokens.add(h.token);
    accepted.set(h.fence, tokens);
  }
  return {
    holds: holds.length,
    overlaps,
    margins,
    revived: events.filter((e) => e.ev === 'checked' && (e.held === true || e.released === true)),
    fencesTwice: [...accepted]
      .filter(([, tokens]) => tokens.size > 1)
      .map(([fence, tokens]) => ({ fence, tokens: [...tokens] })),
    unfenced: holds.filter(
      (h) =>
        !(h.fence > 0) || (typeof h.fenceOk === 'string' && h.fenceOk !== 'RedisUnavailableError'),
    ),
  };
}

/** What the checker found in a queue scenario. */
export interface QueueFindings {
  tasks: number;
  /** Enqueued ids whose handler never ran to its end. */
  lost: string[];
  /** Ids still ready, delayed, leased or dead at the end. */
  stuck: number;
  /** Handler runs beyond the first per id (at-least-once). */
  duplicates: number;
}

/** Analyses a queue scenario: every id ran to its end at least once, none is left. */
export function checkQueue(
  events: readonly AppEvent[],
  ids: readonly string[],
  left: number,
): QueueFindings {
  const ran = new Map<string, number>();
  for (const e of events) if (e.ev === 'ran') ran.set(e.id, (ran.get(e.id) ?? 0) + 1);
  return {
    tasks: ids.length,
    lost: ids.filter((id) => !ran.has(id)),
    stuck: left,
    duplicates: [...ran.values()].reduce((sum, n) => sum + n - 1, 0),
  };
}
