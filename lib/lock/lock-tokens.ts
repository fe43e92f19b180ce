// Acquisition tokens: how this instance makes them, and what can be read back from one
// (the instance tag and the time it was made; see docs/locks.md).
import { randomFillSync } from 'node:crypto';

/** Random bytes drawn in bulk for tokens (one system call per 256 tokens). */
const TOKEN_POOL = Buffer.alloc(12 * 256);
let tokenOffset = TOKEN_POOL.length;

/**
 * Makes fresh acquisition tokens of 43 hex digits: the instance's 8-digit tag (who), the local
 * clock in ms as 11 digits (since when: a line entry's join time) and 96 random bits (see
 * docs/locks.md). The tag + time head is built once per ms.
 */
export function tokenMaker(tag: string): () => string {
  let headMs = 0;
  let head = '';
  return () => {
    if (tokenOffset === TOKEN_POOL.length) {
      randomFillSync(TOKEN_POOL);
      tokenOffset = 0;
    }
    tokenOffset += 12;
    const now = Date.now();
    if (now !== headMs) {
      headMs = now;
      head = tag + now.toString(16);
    }
    return head + TOKEN_POOL.toString('hex', tokenOffset - 12, tokenOffset);
  };
}

/** The tag of the instance that made a token: its first 8 hex digits. */
export function tokenTag(token: string): string {
  return token.slice(0, 8);
}

/** When a token was made (epoch ms, by its maker's clock): digits 9 to 19 of it. */
export function tokenTime(token: string): number {
  return parseInt(token.slice(8, 19), 16);
}
