// Runs in every test file (setupFilesAfterEnv of both Jest configs). A `process.once('exit')` hook
// never runs inside a test file, so this is what stops the processes a file started and left
// running, e.g. because a test failed before its own cleanup. The shared redis-server of the
// global setup lives in Jest's parent process and is not affected.
import { killSpawnedChildren } from './child';
import { stopAllRedisServers } from './redis-server';
import { stopAllRedisSentinels } from './redis-sentinel';

afterAll(async () => {
  // Sentinels first: they would otherwise start a failover when their servers go away.
  await stopAllRedisSentinels();
  await Promise.all([stopAllRedisServers(), killSpawnedChildren()]);
});
