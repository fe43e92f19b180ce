import { rmSync } from 'node:fs';
import globalTeardown from '../../support/global-teardown';
import { faultTable } from './fault-report';
import { PROFILE_NAME } from './profile';

/** Prints the results table of the scenarios that ran, then stops the shared redis-server. */
export default async function faultsGlobalTeardown(): Promise<void> {
  const dir = process.env.FAULTS_REPORT_DIR;
  if (dir) {
    const table = faultTable(dir);
    if (table) process.stdout.write(`\nFault suite results (profile: ${PROFILE_NAME})\n${table}\n`);
    rmSync(dir, { recursive: true, force: true });
  }
  await globalTeardown();
}
