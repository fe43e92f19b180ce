import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { chromium, type Browser } from 'playwright-core';

/**
 * The Chromium the browser tests drive: CHROMIUM_BIN, or chromium / chromium-browser on PATH,
 * installed first by scripts/ensure-chromium.sh when missing (as the redis-server is);
 * `undefined`, with the reason written to stderr, only when none can be installed.
 */
export function chromiumPath(): string | undefined {
  try {
    execFileSync('bash', [resolve(__dirname, '..', '..', 'scripts', 'ensure-chromium.sh')], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  } catch {
    return undefined;
  }
  if (process.env.CHROMIUM_BIN) return process.env.CHROMIUM_BIN;
  for (const name of ['chromium', 'chromium-browser']) {
    try {
      return execFileSync('bash', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim();
    } catch {
      // not this name
    }
  }
  return undefined;
}

/** Launches headless Chromium at `executablePath` (no sandbox: tests may run as root). */
export function launchChromium(executablePath: string): Promise<Browser> {
  return chromium.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
}
