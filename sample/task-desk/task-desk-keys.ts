/** The queue that is the desk's pool of tasks. */
export const DESK_QUEUE = 'desk';

/** The lock an editor's requests run under, so that one editor's calls never interleave. */
export function editorLockKey(editor: string): string {
  return `editor:${editor}`;
}

/** Redis keys of the task desk (one hash tag, so a Cluster keeps them in one slot). */
export interface DeskKeys {
  /** HASH: editor → JSON of the leased task they hold. */
  holders: string;
  /** HASH: task id → the editor who submitted it. */
  submittedBy: string;
  /** HASH: task id → how many times it was submitted (1; more would be a bug). */
  submissions: string;
}

/** The desk's keys under `prefix`. */
export function deskKeys(prefix: string): DeskKeys {
  const base = `${prefix}{desk}`;
  return {
    holders: `${base}:holders`,
    submittedBy: `${base}:submitted-by`,
    submissions: `${base}:submissions`,
  };
}
