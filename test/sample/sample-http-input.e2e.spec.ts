import 'reflect-metadata';
import { Agent, request as httpRequest } from 'node:http';
import { Logger } from '@nestjs/common';
import type { PostgresServer } from '../../scripts/postgres-server';
import { salePage } from '../../sample/flash-sale/sale-page';
import { uniquePrefix } from '../support/helpers';
import { createDatabase, describeWithPostgres, startTestPostgres } from './support/postgres';
import { startSample, type RunningSample } from './support/sample-app';

/** Sends `body` as it is (no JSON encoding) with the given headers; resolves with status and body. */
function sendRaw(
  agent: Agent,
  url: string,
  body: string,
  headers: Record<string, string>,
): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { method: 'POST', agent, headers: { 'content-length': Buffer.byteLength(body), ...headers } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describeWithPostgres('sample: hostile and malformed request bodies', () => {
  let postgres: PostgresServer;
  let sample: RunningSample;
  let agent: Agent;
  let errors: string[];

  beforeAll(async () => {
    postgres = await startTestPostgres();
    const databaseUrl = await createDatabase(postgres, 'http_input');
    sample = await startSample({ keyPrefix: uniquePrefix('sample-input'), databaseUrl });
    agent = new Agent({ keepAlive: true });
  });

  beforeEach(() => {
    errors = [];
    // Nest's exception handler logs through the static Logger's error().
    jest
      .spyOn(Logger.prototype, 'error')
      .mockImplementation((m: unknown) => void errors.push(String(m)));
    jest.spyOn(Logger, 'error').mockImplementation((m: unknown) => void errors.push(String(m)));
  });

  afterEach(() => jest.restoreAllMocks());

  afterAll(async () => {
    agent?.destroy();
    await sample?.app.close();
    await postgres?.destroy();
  });

  const json = { 'content-type': 'application/json' };

  it('answers 400 naming the field to an array nested 5,000 deep, not 500', async () => {
    const deep = `{"sku":"deep","stock":${'['.repeat(5_000)}${']'.repeat(5_000)},"price":1}`;
    const answer = await sendRaw(agent, `${sample.url}/flash-sales`, deep, json);
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ field: 'stock', error: 'Bad Request' });
    expect(answer.body.message).toBe(
      'stock must be an integer from 0 to 1000000, got an array nested too deeply to show',
    );
    expect(errors).toEqual([]);
  });

  it('answers 413 to a body over the size limit without logging an error', async () => {
    const big = JSON.stringify({ sku: 'a'.repeat(300_000) });
    const answer = await sendRaw(agent, `${sample.url}/flash-sales`, big, json);
    expect(answer.status).toBe(413);
    expect(answer.body).toEqual({
      statusCode: 413,
      error: 'Payload Too Large',
      message: 'request entity too large',
    });
    expect(errors).toEqual([]);
  });

  it('answers 415 naming the content type to a body that is not JSON (curl -d without -H)', async () => {
    const body = '{"sku":"form","stock":3,"price":1}';
    const form = await sendRaw(agent, `${sample.url}/flash-sales`, body, {
      'content-type': 'application/x-www-form-urlencoded',
    });
    expect(form.status).toBe(415);
    expect(form.body.message).toBe(
      "send the request body as JSON with 'content-type: application/json' " +
        "(got 'application/x-www-form-urlencoded')",
    );
    const none = await sendRaw(agent, `${sample.url}/flash-sales`, body, {});
    expect(none.status).toBe(415);
    expect(none.body.message).toMatch(/\(got no content-type\)$/);
    // The same body as JSON opens the sale.
    expect((await sendRaw(agent, `${sample.url}/flash-sales`, body, json)).status).toBe(201);
    expect(errors).toEqual([]);
  });
});

describe("sample: the sale page's markup", () => {
  it("has a userId pattern that browsers can compile (they use the 'v' flag) and an icon", () => {
    const page = salePage('phone');
    const pattern = /pattern="([^"]*)"/.exec(page)![1];
    const check = new RegExp(`^(?:${pattern})$`, 'v');
    expect(['u1', 'a.b_c:d-e'].map((id) => check.test(id))).toEqual([true, true]);
    expect(['-x', 'a b', 'x'.repeat(65)].map((id) => check.test(id))).toEqual([
      false,
      false,
      false,
    ]);
    expect(page).toContain('<link rel="icon" href="data:,">');
  });
});
