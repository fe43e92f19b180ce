import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { INestApplicationContext } from '@nestjs/common';
import { defineQueue, QueueError, QueueService, RedisLockOptionsError } from '../../lib';
import { RedisLockQueueAdapter } from '../../lib/bull-board';
import { createLockApp, uniquePrefix } from '../support/helpers';

const root = resolve(__dirname, '../..');

/** The TypeScript files under `dir`, as paths from the repository root. */
const tsFiles = (dir: string): string[] =>
  readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(dir, f));

describe('RedisLockQueueAdapter', () => {
  let app: INestApplicationContext;
  let queues: QueueService;

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: uniquePrefix('bull-board-adapter') });
    queues = app.get(QueueService);
  });
  afterAll(async () => {
    await app.close();
  });

  it('is named by its queue (a name or a defineQueue handle) and its prefix', () => {
    expect(new RedisLockQueueAdapter(queues, 'orders').getName()).toBe('orders');
    const typed = defineQueue<{ sku: string }>('typed');
    expect(new RedisLockQueueAdapter(queues, typed, { prefix: 'eu:' }).getName()).toBe('eu:typed');
  });

  it('shows the displayName and description it is given', () => {
    const adapter = new RedisLockQueueAdapter(queues, 'orders', {
      displayName: 'Orders',
      description: 'paid orders to fulfil',
    });
    expect(adapter.getDisplayName()).toBe('Orders');
    expect(adapter.getDescription()).toBe('paid orders to fulfil');
  });

  it.each([
    [{ readOnly: true }, 'options.readOnly'],
    [{ readOnlyMode: 'yes' }, 'readOnlyMode'],
    [{ allowRetries: 1 }, 'allowRetries'],
    [{ prefix: 42 }, 'prefix'],
    [{ delimiter: null }, 'delimiter'],
    [{ displayName: 1 }, 'displayName'],
    [{ description: false }, 'description'],
    ['read-only', 'options'],
  ])('rejects the options %p naming %s', (options, option) => {
    const create = () => new RedisLockQueueAdapter(queues, 'q', options as never);
    expect(create).toThrow(RedisLockOptionsError);
    expect(create).toThrow(expect.objectContaining({ option }));
  });

  it('rejects something else than the QueueService, and a bad queue name', () => {
    const notService = () => new RedisLockQueueAdapter({} as QueueService, 'q');
    expect(notService).toThrow(expect.objectContaining({ option: 'queues' }));
    for (const name of ['', 7, undefined]) {
      const create = () => new RedisLockQueueAdapter(queues, name as never);
      expect(create).toThrow(QueueError);
      expect(create).toThrow(expect.objectContaining({ argument: 'queue' }));
    }
  });

  it('is loaded only from its own entry point: nothing else imports it or @bull-board', () => {
    const importers = tsFiles('lib').filter((file) => {
      if (file.startsWith('lib/bull-board/')) return false;
      const source = readFileSync(join(root, file), 'utf8');
      return /from '(@bull-board\/|\.\.?\/(\.\.\/)*bull-board)/.test(source);
    });
    expect(importers).toEqual([]);
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    expect(pkg.exports['./bull-board']).toEqual({
      types: './dist/bull-board/index.d.ts',
      default: './dist/bull-board/index.js',
    });
    expect(tsFiles('lib/bull-board')).toContain('lib/bull-board/index.ts');
    expect(pkg.peerDependenciesMeta['@bull-board/api']).toEqual({ optional: true });
  });
});
