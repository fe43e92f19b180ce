/** What a fenced resource holds: the last accepted value and the fence it was written with. */
export interface FencedValue {
  /** The value of the last accepted write. */
  value: string;
  /** The fence of the last accepted write: the highest fence the resource has seen. */
  fence: number;
  /** The token of the writer of the last accepted write; absent when it gave a bare fence. */
  token?: string;
}
