import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROFILE_NAME } from './profile';

/** What one scenario measured, for the table of docs/faults.md. */
export interface FaultResult {
  scenario: string;
  /** Operations run against the library (sections, calls, writes, ...). */
  operations: number;
  /** Faults injected (kills, freezes, restarts, delayed links, invalid calls). */
  faults: number;
  /** Invariant violations found (expected: 0). */
  violations: number;
  /** Longest time the scenario's lock (or service) was unavailable, in ms. */
  longestUnavailabilityMs: number;
  /** What the unavailability measures, and anything else worth a line. */
  note: string;
}

/**
 * Records a scenario's result: one line on stdout, and a JSON file in `FAULTS_REPORT_DIR`
 * (set by the suite's global setup) for the summary table printed at the end of the run.
 */
export function reportFaults(result: FaultResult): void {
  const line =
    `[faults:${PROFILE_NAME}] ${result.scenario}: ${result.operations} operations, ` +
    `${result.faults} faults, ${result.violations} violations, longest unavailability ` +
    `${Math.round(result.longestUnavailabilityMs)} ms (${result.note})\n`;
  process.stdout.write(line);
  const dir = process.env.FAULTS_REPORT_DIR;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, `${result.scenario.replace(/[^a-z0-9]+/gi, '-')}.json`),
    JSON.stringify(result),
  );
}

/** The results recorded in `dir`, as a Markdown table. */
export function faultTable(dir: string): string {
  const rows = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as FaultResult);
  if (rows.length === 0) return '';
  const lines = [
    '| scenario | operations | faults injected | violations | longest unavailability | measured |',
    '| --- | ---: | ---: | ---: | ---: | --- |',
    ...rows.map(
      (r) =>
        `| ${r.scenario} | ${r.operations} | ${r.faults} | ${r.violations} | ` +
        `${Math.round(r.longestUnavailabilityMs)} ms | ${r.note} |`,
    ),
  ];
  return lines.join('\n');
}
