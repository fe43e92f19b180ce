/**
 * Who writes a fenced resource: its fence and the token that identifies its grant. A `Lock` and a
 * `Permit` are `FencedWriter`s; so is `{ fence: lock.fence, token: lock.token }` carried to
 * another process.
 */
export interface FencedWriter {
  /** The writer's fencing token (`lock.fence`): a positive safe integer. */
  readonly fence: number;
  /** The writer's lock token (`lock.token`): tells two writers with the same fence apart. */
  readonly token: string;
}
