/**
 * Which shapes and libraries a run is limited to (`--shapes`, `--libraries`); an absent list
 * selects everything.
 */
export interface RunFilter {
  /** Shape ids or families: `parked` selects `parked-1000` and `parked-10000`. */
  readonly shapes?: readonly string[];
  /** Library ids, as in results.json (`ours`, `redis-semaphore`, `bullmq`, …). */
  readonly libraries?: readonly string[];
}

/** Whether `shapeId` runs: named exactly, or its family (`crowd` for `crowd-8x16`) named. */
export function shapeSelected(filter: RunFilter, shapeId: string): boolean {
  return !filter.shapes || filter.shapes.some((s) => shapeId === s || shapeId.startsWith(`${s}-`));
}

/** The rows of `list` the filter selects. */
export function selectedLibraries<L extends { id: string }>(
  filter: RunFilter,
  list: readonly L[],
): L[] {
  return list.filter((l) => !filter.libraries || filter.libraries.includes(l.id));
}

/**
 * The filter of `--shapes a,b` and `--libraries c,d` (comma-separated values), checked against
 * the ids of this run.
 * @throws Error naming the option and the unknown value, with the known ones
 * @example
 * parseRunFilter('parked,crowd', 'ours,redis-semaphore', shapeIds, libraryIds)
 */
export function parseRunFilter(
  shapes: string | undefined,
  libraries: string | undefined,
  knownShapes: readonly string[],
  knownLibraries: readonly string[],
): RunFilter {
  const list = (option: string, value: string | undefined, matches: (v: string) => boolean) => {
    if (value === undefined) return undefined;
    const items = value
      .split(',')
      .map((v) => v.trim())
      .filter(Boolean);
    const unknown = items.find((v) => !matches(v));
    if (items.length === 0 || unknown !== undefined) {
      const known = option === '--shapes' ? knownShapes : knownLibraries;
      throw new Error(
        `${option}: unknown value '${unknown ?? value}'; known: ${[...new Set(known)].join(', ')}`,
      );
    }
    return items;
  };
  return {
    shapes: list('--shapes', shapes, (v) =>
      knownShapes.some((id) => shapeSelected({ shapes: [v] }, id)),
    ),
    libraries: list('--libraries', libraries, (v) => knownLibraries.includes(v)),
  };
}

/** A line for the report saying what a filtered run left out; `undefined` when nothing. */
export function filterNote(filter: RunFilter): string | undefined {
  if (!filter.shapes && !filter.libraries) return undefined;
  const parts = [
    filter.shapes && `--shapes ${filter.shapes.join(',')}`,
    filter.libraries && `--libraries ${filter.libraries.join(',')}`,
  ].filter(Boolean);
  return `filtered run (${parts.join(' ')}): the other shapes and libraries did not run`;
}
