// The tests start redis-server with the same launcher as the sample and the benchmarks.
export * from '../../scripts/redis-server';
