/**
 * The waiting room's page of one user (`GET /flash-sales/:sku/wait?userId=`): "you are number N,
 * about T s", updated by the server-sent events of `/flash-sales/:sku/wait/events`, then, once the
 * user is admitted, the buy form. No framework, no build step.
 * @param sku a validated id (letters, digits, `.`, `_`, `:`, `-`: nothing to escape in HTML or JS)
 * @param userId a validated id (the same alphabet)
 */
export function waitingRoomPage(sku: string, userId: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<link rel="icon" href="data:,">
<title>waiting room ${sku}</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 2rem; max-width: 40rem; }
  #place { font-size: 1.6rem; margin: 1rem 0; }
</style>
</head>
<body>
<h1>Flash sale <code>${sku}</code></h1>
<div id="place">connecting…</div>
<form id="buy" hidden>
  <button>Buy as <code>${userId}</code></button> <span id="order"></span>
</form>
<script>
  const sku = ${JSON.stringify(sku)};
  const userId = ${JSON.stringify(userId)};
  const place = document.getElementById('place');
  const form = document.getElementById('buy');
  const events = new EventSource('/flash-sales/' + sku + '/wait/events?userId=' + encodeURIComponent(userId));
  events.addEventListener('status', (e) => {
    const s = JSON.parse(e.data);
    if (s.admitted) {
      events.close();
      // When the form appeared (ms since the epoch): what bench/waiting-room-page.ts measures.
      form.dataset.shownAt = String(Date.now());
      place.textContent = "It's your turn: your pass is valid " + Math.floor(s.passExpiresInMs / 1000) + ' s.';
      form.hidden = false;
      return;
    }
    place.textContent = 'You are number ' + s.position +
      (s.etaMs === null ? ' (the sale has not started)' : ', about ' + Math.ceil(s.etaMs / 1000) + ' s');
  });
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const out = document.getElementById('order');
    const res = await fetch('/flash-sales/' + sku + '/buy', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userId }),
    });
    const body = await res.json();
    out.textContent = res.status === 202 ? body.orderId + ': pending…' : res.status + ': ' + body.message;
  });
</script>
</body>
</html>
`;
}
