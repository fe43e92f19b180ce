import type { ServerResponse } from 'node:http';

/**
 * The page's Content Security Policy: its own scripts, styles and API only (the page has no
 * inline script or style), no plugin, no form target elsewhere, and no framing by any page
 * (`frame-ancestors 'none'`, which `X-Frame-Options: DENY` says to older browsers).
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ');

/**
 * Sets the dashboard's security headers on every response of its routes, before the guards run,
 * so that refusals and errors carry them too: `X-Frame-Options: DENY` and `DASHBOARD_CSP` (no
 * click-jacking of its buttons in a frame), `X-Content-Type-Options: nosniff`. A Nest functional
 * middleware that only calls Node's `ServerResponse.setHeader` (Express's response extends it;
 * Fastify's middleware gets the raw one).
 */
export function dashboardHeaders(_req: unknown, res: ServerResponse, next: () => void): void {
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('Content-Security-Policy', DASHBOARD_CSP);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  next();
}
