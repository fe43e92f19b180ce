import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sweepNetwork } from './netns';
import { PROFILE_NAME } from './profile';
import { summaries, table } from './report';

/**
 * Removes every namespace and rule of the run (also after a failed test), then prints the
 * per-scenario summary and writes it to `$TMPDIR/partitions-report.json`.
 */
export default async function partitionsGlobalTeardown(): Promise<void> {
  if (process.env.PARTITIONS_NETNS === '1') await sweepNetwork();
  else {
    // Said again at the end, where a reader of the log looks: nothing was checked.
    process.stderr.write(
      '\n!! partition suite: every scenario was SKIPPED (no network namespaces here, see above)\n',
    );
  }
  const dir = process.env.PARTITIONS_REPORT_DIR;
  if (!dir) return;
  const rows = summaries(dir);
  rmSync(dir, { recursive: true, force: true });
  if (rows.length === 0) return;
  const file = join(tmpdir(), 'partitions-report.json');
  writeFileSync(file, JSON.stringify({ profile: PROFILE_NAME, scenarios: rows }, null, 2));
  process.stdout.write(
    `\nPartition suite results (profile: ${PROFILE_NAME}; ${file})\n${table(rows)}\n`,
  );
}
