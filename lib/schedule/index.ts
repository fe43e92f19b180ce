export { OncePerTick, type OncePerTickOptions } from './once-per-tick.decorator';
export { currentTick, type TickInfo } from './tick-claims';
