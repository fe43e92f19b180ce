export { FencedStore } from './fenced-store';
export type { FencedValue } from './interfaces/fenced-value.interface';
