/** The queue that is the desk's pool of tasks. */
export const DESK_QUEUE = 'desk';

/**
 * `@WithLock` key template of the editor lock: `editor:` + the handler's first argument, the
 * editor. The one place the lock's name is written; `editorLockKey` fills it in.
 */
export const EDITOR_LOCK_TEMPLATE = 'editor:<0>';

/** The lock an editor's requests run under, so that one editor's calls never interleave. */
export function editorLockKey(editor: string): string {
  // A function replacer, so that nothing in `editor` is read as a `$` pattern.
  return EDITOR_LOCK_TEMPLATE.replace('<0>', () => editor);
}

/** Redis keys of the task desk (one hash tag, so a Cluster keeps them in one slot). */
export interface DeskKeys {
  /** HASH: editor → JSON of the leased task they hold. */
  holders: string;
  /**
   * HASH: `<attempt>:<task id>` → the editor who submitted that lease of the task. One field per
   * acked lease, written again unchanged when a write runs twice (ioredis resends a command whose
   * reply was lost), so a task's fields count its submissions: 1, more would be a bug.
   */
  submissions: string;
}

/** The desk's keys under `prefix`. */
export function deskKeys(prefix: string): DeskKeys {
  const base = `${prefix}{desk}`;
  return {
    holders: `${base}:holders`,
    submissions: `${base}:submissions`,
  };
}
