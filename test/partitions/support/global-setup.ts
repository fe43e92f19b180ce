import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compileFixture } from './compile';
import { netnsSupport, sweepNetwork } from './netns';

/**
 * Compiles the instances' code once (support/compile.ts). Sweeps what an earlier run left (namespaces `rlp-*` and their processes, the root veth), says
 * loudly when this machine cannot make network namespaces (the scenarios then skip), and makes
 * the folder where each scenario leaves its summary.
 */
export default async function partitionsGlobalSetup(): Promise<void> {
  const support = netnsSupport();
  process.env.PARTITIONS_NETNS = support.ok ? '1' : '0';
  if (!support.ok) {
    process.stderr.write(
      `\n${'!'.repeat(78)}\n!! The partition suite needs network namespaces and iptables: ${support.reason}.\n` +
        '!! EVERY PARTITION SCENARIO IS SKIPPED. Run it as root with iproute2 and iptables\n' +
        `!! (bash scripts/ensure-netns.sh installs them).\n${'!'.repeat(78)}\n\n`,
    );
    return;
  }
  const left = await sweepNetwork();
  if (left.length)
    process.stderr.write(`partitions: removed leftover namespaces ${left.join(', ')}\n`);
  process.env.PARTITIONS_REPORT_DIR = mkdtempSync(join(tmpdir(), 'redis-lock-partitions-'));
  // PARTITIONS_LIB_DIR: another copy of lib/ to run the instances on (e.g. an older commit's, to
  // see the suite fail where that version breaks a promise).
  process.env.PARTITIONS_FIXTURE = compileFixture(process.env.PARTITIONS_LIB_DIR || undefined);
}
