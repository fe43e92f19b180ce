import type autocannon from 'autocannon';

/**
 * The autocannon request of one buy of `sku` (`POST /flash-sales/:sku/buy`), with a body made
 * per request from `nextUserId()`: used by `npm run sample:load` and the bench's flash-sale shape.
 * @example
 * let n = 0; autocannon({ url, requests: [buyRequest('phone', () => `buyer-${n++}`)] });
 */
export function buyRequest(sku: string, nextUserId: () => string): autocannon.Request {
  return {
    method: 'POST',
    path: `/flash-sales/${sku}/buy`,
    headers: { 'content-type': 'application/json' },
    setupRequest: (request) => ({ ...request, body: JSON.stringify({ userId: nextUserId() }) }),
  };
}
