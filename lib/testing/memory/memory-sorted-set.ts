/**
 * A sorted set: members by score, ties by member (byte order, as Redis). Kept as a map and an
 * array sorted again lazily after writes: a test's sets are small, reads follow bursts of writes.
 */
export class MemorySortedSet {
  readonly scores = new Map<string, number>();
  private order: string[] = [];
  private dirty = false;

  get size(): number {
    return this.scores.size;
  }

  /** Sets `member`'s score; true when it was not a member before. */
  set(member: string, score: number): boolean {
    const added = !this.scores.has(member);
    this.scores.set(member, score);
    this.dirty = true;
    return added;
  }

  delete(member: string): boolean {
    const had = this.scores.delete(member);
    if (had) this.dirty = true;
    return had;
  }

  /** Members in order (ascending score, then member). */
  sorted(): readonly string[] {
    if (this.dirty) {
      this.order = [...this.scores.keys()].sort((a, b) => {
        const d = this.scores.get(a)! - this.scores.get(b)!;
        if (d !== 0) return d;
        return a < b ? -1 : a > b ? 1 : 0;
      });
      this.dirty = false;
    }
    return this.order;
  }

  /** 0-based position of `member` in order, or -1. */
  rank(member: string): number {
    return this.scores.has(member) ? this.sorted().indexOf(member) : -1;
  }
}

/** A bound of ZRANGEBYSCORE/ZCOUNT: `5`, `(5` (exclusive), `-inf`, `+inf`. */
export interface ScoreBound {
  value: number;
  exclusive: boolean;
}

/** Parses a score bound; undefined when it is not one. */
export function parseScoreBound(text: string): ScoreBound | undefined {
  const exclusive = text.startsWith('(');
  const value = parseScore(exclusive ? text.slice(1) : text);
  return value === undefined ? undefined : { value, exclusive };
}

/** Parses a score (`inf`, `+inf`, `-inf` included); undefined when it is not a number. */
export function parseScore(text: string): number | undefined {
  const t = text.toLowerCase();
  if (t === 'inf' || t === '+inf') return Infinity;
  if (t === '-inf') return -Infinity;
  if (t.trim() === '' || t !== t.trim()) return undefined;
  const n = Number(t);
  return Number.isNaN(n) ? undefined : n;
}

export const aboveMin = (score: number, min: ScoreBound) =>
  min.exclusive ? score > min.value : score >= min.value;

export const belowMax = (score: number, max: ScoreBound) =>
  max.exclusive ? score < max.value : score <= max.value;

/** A bound of ZRANGEBYLEX: `[a`, `(a`, `-`, `+`. */
export interface LexBound {
  value: string;
  exclusive: boolean;
  infinite?: -1 | 1;
}

export function parseLexBound(text: string): LexBound | undefined {
  if (text === '-') return { value: '', exclusive: false, infinite: -1 };
  if (text === '+') return { value: '', exclusive: false, infinite: 1 };
  if (text.startsWith('[')) return { value: text.slice(1), exclusive: false };
  if (text.startsWith('(')) return { value: text.slice(1), exclusive: true };
  return undefined;
}

export function lexAboveMin(member: string, min: LexBound): boolean {
  if (min.infinite) return min.infinite < 0;
  return min.exclusive ? member > min.value : member >= min.value;
}

export function lexBelowMax(member: string, max: LexBound): boolean {
  if (max.infinite) return max.infinite > 0;
  return max.exclusive ? member < max.value : member <= max.value;
}
