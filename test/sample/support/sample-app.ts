import { Agent, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { SampleAppModule } from '../../../sample/app.module';
import { SampleConfig, type SampleConfigValues } from '../../../sample/config/sample-config';
import { testRedisUrl } from '../../support/helpers';

/** One instance of the sample app, listening on a free loopback port. */
export interface RunningSample {
  readonly app: INestApplication;
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
}

/**
 * Starts the sample's module (through @nestjs/testing) on the test Redis with `config` (give each
 * test its own `keyPrefix`), listening on a free port. Several instances with the same prefix
 * are several app servers sharing one Redis.
 */
export async function startSample(config: Partial<SampleConfigValues>): Promise<RunningSample> {
  const moduleRef = await Test.createTestingModule({
    imports: [SampleAppModule.forRoot(new SampleConfig({ redisUrl: testRedisUrl(), ...config }))],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: ['error'] });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  return { app, url: `http://127.0.0.1:${port}` };
}

/** An HTTP answer with its JSON body parsed (or the raw text when it is not JSON). */
export interface HttpAnswer<T = any> {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: T;
}

/**
 * Sends one request with a JSON body (if any) through `agent` (keep-alive, so that many requests
 * reuse a bounded number of sockets) and resolves with the answer.
 */
export function sendJson<T = any>(
  agent: Agent,
  method: 'GET' | 'POST',
  url: string,
  body?: unknown,
): Promise<HttpAnswer<T>> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      {
        method,
        agent,
        headers: payload === undefined ? {} : { 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // not JSON: keep the text
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parsed as T });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** Runs `fn` on every item with at most `limit` calls in flight; results in item order. */
export async function mapConcurrently<I, R>(
  items: readonly I[],
  limit: number,
  fn: (item: I, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i], i);
    }
  });
  await Promise.all(lanes);
  return results;
}
