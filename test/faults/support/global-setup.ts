import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import globalSetup from '../../support/global-setup';

/** The usual shared redis-server, plus a directory where each scenario leaves its result. */
export default async function faultsGlobalSetup(): Promise<void> {
  await globalSetup();
  process.env.FAULTS_REPORT_DIR = mkdtempSync(join(tmpdir(), 'redis-lock-faults-'));
}
