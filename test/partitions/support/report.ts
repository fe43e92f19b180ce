import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LockFindings, QueueFindings } from './checker';
import { PROFILE_NAME } from './profile';

/** One scenario's line of the partition report. */
export interface ScenarioSummary {
  scenario: string;
  rounds: number;
  /** Grants seen (lock scenarios) or tasks (queue scenarios). */
  operations: number;
  overlaps: number;
  /** Smallest abort-before-grant margin in ms (`null`: no round measured one). */
  minMarginMs: number | null;
  marginsMs: number[];
  revived: number;
  fencesTwice: number;
  unfenced: number;
  lost: number;
  stuck: number;
  /** Queue: handler runs beyond the first (at-least-once, reported, not a violation). */
  duplicates: number;
  notes: string[];
}

/** A summary of lock findings (queue fields 0). */
export function lockSummary(
  scenario: string,
  rounds: number,
  f: LockFindings,
  notes: string[] = [],
): ScenarioSummary {
  return {
    scenario,
    rounds,
    operations: f.holds,
    overlaps: f.overlaps.length,
    minMarginMs: f.margins.length ? round(Math.min(...f.margins)) : null,
    marginsMs: f.margins.map(round),
    revived: f.revived.length,
    fencesTwice: f.fencesTwice.length,
    unfenced: f.unfenced.length,
    lost: 0,
    stuck: 0,
    duplicates: 0,
    notes,
  };
}

/** A summary of queue findings (lock fields 0). */
export function queueSummary(
  scenario: string,
  rounds: number,
  f: QueueFindings,
  notes: string[] = [],
): ScenarioSummary {
  return {
    scenario,
    rounds,
    operations: f.tasks,
    overlaps: 0,
    minMarginMs: null,
    marginsMs: [],
    revived: 0,
    fencesTwice: 0,
    unfenced: 0,
    lost: f.lost.length,
    stuck: f.stuck,
    duplicates: f.duplicates,
    notes,
  };
}

const round = (ms: number) => Math.round(ms * 10) / 10;

/**
 * Prints the scenario's line and leaves it in `PARTITIONS_REPORT_DIR` (set by the global setup)
 * for the report written at the end of the run.
 */
export function report(summary: ScenarioSummary): void {
  process.stdout.write(`[partitions:${PROFILE_NAME}] ${line(summary)}\n`);
  const dir = process.env.PARTITIONS_REPORT_DIR;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, `${summary.scenario.replace(/[^a-z0-9]+/gi, '-')}.json`),
    JSON.stringify(summary),
  );
}

function line(s: ScenarioSummary): string {
  return (
    `${s.scenario}: ${s.rounds} rounds, ${s.operations} operations, ${s.overlaps} overlaps, ` +
    `min margin ${s.minMarginMs ?? '-'} ms, ${s.revived} revived, ${s.fencesTwice} fences twice, ` +
    `${s.unfenced} unfenced, ${s.lost} lost, ${s.stuck} stuck, ${s.duplicates} duplicates` +
    (s.notes.length ? ` (${s.notes.join('; ')})` : '')
  );
}

/** The summaries left in `dir`, in scenario order. */
export function summaries(dir: string): ScenarioSummary[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as ScenarioSummary)
    .sort((a, b) => a.scenario.localeCompare(b.scenario));
}

/** The summaries as a Markdown table. */
export function table(rows: readonly ScenarioSummary[]): string {
  return [
    '| scenario | rounds | operations | overlaps | min margin | revived | fences twice | unfenced | lost | stuck | duplicates |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map(
      (s) =>
        `| ${s.scenario} | ${s.rounds} | ${s.operations} | ${s.overlaps} | ` +
        `${s.minMarginMs === null ? '-' : `${s.minMarginMs} ms`} | ${s.revived} | ${s.fencesTwice} | ` +
        `${s.unfenced} | ${s.lost} | ${s.stuck} | ${s.duplicates} |`,
    ),
  ].join('\n');
}
