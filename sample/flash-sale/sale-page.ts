/**
 * The page of one sale (`GET /flash-sales/:sku/live`): its counts and its events as they happen,
 * read from `GET /flash-sales/:sku/events` with the browser's `EventSource`, and a form to buy as
 * a user and follow that order. No framework, no build step.
 * @param sku a validated id (letters, digits, `.`, `_`, `:`, `-`: nothing to escape in HTML or JS)
 */
export function salePage(sku: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<link rel="icon" href="data:,">
<title>flash sale ${sku}</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 2rem; max-width: 48rem; }
  #counts { font-size: 1.4rem; margin: 1rem 0; }
  #log { font-family: ui-monospace, monospace; white-space: pre; max-height: 24rem; overflow: auto;
         border: 1px solid #ccc; padding: .5rem; }
</style>
</head>
<body>
<h1>Flash sale <code>${sku}</code></h1>
<div id="counts">connecting…</div>
<form id="buy">
  <input id="user" placeholder="userId" required pattern="[A-Za-z0-9][A-Za-z0-9._:\\-]{0,63}">
  <button>Buy</button> <span id="order"></span>
</form>
<h2>Events</h2>
<div id="log"></div>
<script>
  const sku = ${JSON.stringify(sku)};
  const counts = { stock: 0, sold: 0, orders: 0 };
  const show = () => {
    document.getElementById('counts').textContent =
      counts.stock + ' left · ' + counts.sold + ' sold · ' + counts.orders + ' orders written';
  };
  const log = (line) => {
    const el = document.getElementById('log');
    el.textContent = new Date().toLocaleTimeString() + '  ' + line + '\\n' + el.textContent;
  };
  const events = new EventSource('/flash-sales/' + sku + '/events');
  events.addEventListener('status', (e) => { Object.assign(counts, JSON.parse(e.data)); show(); });
  events.addEventListener('sold', (e) => {
    counts.sold++; counts.stock--; show(); log('sold     ' + JSON.parse(e.data).orderId);
  });
  events.addEventListener('created', (e) => {
    counts.orders++; show(); log('created  ' + JSON.parse(e.data).orderId);
  });
  events.addEventListener('retrying', (e) => log('retrying ' + JSON.parse(e.data).orderId));
  events.addEventListener('failed', (e) => log('failed   ' + JSON.parse(e.data).orderId));
  document.getElementById('buy').addEventListener('submit', async (e) => {
    e.preventDefault();
    const out = document.getElementById('order');
    const res = await fetch('/flash-sales/' + sku + '/buy', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userId: document.getElementById('user').value }),
    });
    const body = await res.json();
    if (res.status !== 202) { out.textContent = res.status + ': ' + body.message; return; }
    out.textContent = body.orderId + ': pending…';
    const order = await (await fetch(body.orderUrl + '?waitMs=30000')).json();
    out.textContent = body.orderId + ': ' + order.state;
  });
</script>
</body>
</html>
`;
}
