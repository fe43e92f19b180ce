/**
 * What `npm run sample` prints once it listens: ready-to-paste curl commands for both stories.
 * @param baseUrl e.g. `http://127.0.0.1:3000`
 * @param deskLeaseMs the task desk's lease, to say how long an editor may keep a task
 */
export function tryItText(baseUrl: string, deskLeaseMs: number): string {
  const json = `-H 'content-type: application/json'`;
  return [
    `Flash sale: 10 phones, one per buyer (a second buy by the same user is refused with 409)`,
    `  curl -s -X POST ${baseUrl}/flash-sales ${json} -d '{"sku":"phone","stock":10,"price":199}'`,
    `  curl -s -X POST ${baseUrl}/flash-sales/phone/buy ${json} -d '{"userId":"alice"}'`,
    `  curl -s '${baseUrl}/orders/phone-1?waitMs=5000'    # follow the order (202's orderUrl)`,
    `  curl -s -N ${baseUrl}/flash-sales/phone/events    # live: units sold, orders created (Ctrl-C ends it)`,
    `  open ${baseUrl}/flash-sales/phone/live in a browser: the same events, and a buy form`,
    `  curl -s ${baseUrl}/flash-sales/phone`,
    `  curl -s ${baseUrl}/flash-sales/phone/orders`,
    `  SAMPLE_URL=${baseUrl} npm run sample:load    # 5,000 buyers, 200 connections, stock 100`,
    ``,
    `Task desk: each article edited by one editor at a time; a task held over ${deskLeaseMs} ms goes back to the pool`,
    `  curl -s -X POST ${baseUrl}/tasks ${json} -d '{"ids":["article-1","article-2","article-3"]}'`,
    `  curl -s -X POST ${baseUrl}/editors/ann/next`,
    `  curl -s -X POST ${baseUrl}/editors/ann/submit`,
    `  curl -s ${baseUrl}/tasks`,
  ].join('\n');
}
