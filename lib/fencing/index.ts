export { FencedStore } from './fenced-store';
export type { FencedValue } from './interfaces/fenced-value.interface';
export type { FencedWriter } from './interfaces/fenced-writer.interface';
