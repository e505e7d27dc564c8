import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { buildTestApp, call, register, type TestApp } from './helpers.ts';

const silent = pino({ level: 'silent' });

/**
 * On SQLite every statement runs on the process's one thread: a bulk step that does not let other requests
 * through freezes every workspace (a 200,000-row import held `GET /api` for 5.9 s). This polls `GET /api` over
 * real HTTP while another workspace's bulk work runs, and takes the longest wait. The goal is 100 ms per
 * synchronous step: the test prints each longest wait (performance.md keeps them) and fails on a freeze, a
 * wait of seconds, which is what a step that does not yield makes. A bound near the goal (it was 250 ms) is a
 * timed assertion that a loaded machine breaks now and then.
 */
const POLLER = `
const { parentPort, workerData } = require('node:worker_threads');
let stop = false, max = 0, polls = 0, failed = 0;
parentPort.on('message', () => { stop = true; });
(async () => {
  await (await fetch(workerData)).arrayBuffer();
  parentPort.postMessage('ready');
  while (!stop) {
    const start = performance.now();
    try {
      const res = await fetch(workerData);
      await res.arrayBuffer();
      if (res.status !== 200) failed += 1;
    } catch { failed += 1; }
    max = Math.max(max, performance.now() - start);
    polls += 1;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  parentPort.postMessage({ max, polls, failed });
  parentPort.close();
})();
`;

/**
 * The client that uploads: a worker thread of its own, which builds the CSV and posts it, so the file's tens of
 * megabytes (and their garbage collection) are not in the server's heap, as they would not be in production.
 */
const UPLOADER = `
const { parentPort, workerData } = require('node:worker_threads');
(async () => {
  const { url, token, kind, rows, bytes } = workerData;
  const lines = [];
  if (kind === 'voters') {
    lines.push('name,phone,constituency,booth,ward');
    for (let i = 0; i < rows; i++)
      lines.push('Voter ' + i + ',+9198' + String(i).padStart(8, '0') + ',Constituency ' + (i % 300) + ',' + (i % 1000) + ',' + (i % 50));
  } else {
    lines.push('address,channel,reason');
    let size = lines[0].length + 1;
    for (let i = 0; size < bytes - 100; i++) {
      const line = '+9197' + String(i).padStart(8, '0') + ',sms,asked';
      lines.push(line);
      size += line.length + 1;
    }
  }
  const form = new FormData();
  form.append('file', new Blob([lines.join('\\n') + '\\n'], { type: 'text/csv' }), 'file.csv');
  const res = await fetch(url, { method: 'POST', headers: { authorization: 'Bearer ' + token }, body: form });
  parentPort.postMessage({ status: res.status, body: await res.json(), rows: lines.length - 1 });
})();
`;

const ROWS = Number(process.env.RESPONSIVENESS_ROWS ?? 200_000);
/** A freeze, not the goal (above). */
const MAX_WAIT_MS = 2_000;

describe('SQLite stays responsive during another workspace’s bulk work', () => {
  let t: TestApp;
  let base: string;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ces-responsive-'));
    t = await buildTestApp('sqlite', { DATABASE_URL: `sqlite:${join(dir, 'ces.db')}` });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Runs `work` while a worker thread (an event loop of its own, as a separate client would be) polls GET /api
   * every 10 ms; returns the longest wait for an answer.
   */
  async function longestWait(work: () => Promise<void>): Promise<{ max: number; polls: number }> {
    const poller = new Worker(POLLER, { eval: true, workerData: `${base}/api` });
    await once(poller, 'message');
    try {
      await work();
    } finally {
      poller.postMessage('stop');
    }
    const [result] = (await once(poller, 'message')) as [{ max: number; polls: number; failed: number }];
    expect(result.failed).toBe(0);
    return result;
  }

  /** Uploads from its own thread (UPLOADER); resolves with the answer. */
  async function upload(
    token: string,
    path: string,
    file: { kind: 'voters'; rows: number } | { kind: 'opt-outs'; bytes: number },
  ): Promise<{ status: number; body: { data: Record<string, number> }; rows: number }> {
    const uploader = new Worker(UPLOADER, {
      eval: true,
      workerData: { url: `${base}${path}`, token, ...file },
    });
    const [answer] = (await once(uploader, 'message')) as [
      { status: number; body: { data: Record<string, number> }; rows: number },
    ];
    await uploader.terminate();
    return answer;
  }

  let importer: Awaited<ReturnType<typeof register>> | undefined;

  it(`a ${ROWS.toLocaleString('en')}-row voter import`, async () => {
    const owner = await register(t.app);
    importer = owner;
    let answer: Awaited<ReturnType<typeof upload>> | undefined;
    const { max, polls } = await longestWait(async () => {
      answer = await upload(owner.token, '/api/voters/import', { kind: 'voters', rows: ROWS });
    });
    expect(answer?.status).toBe(200);
    expect(answer?.body.data.imported).toBe(ROWS);
    console.log(
      `voter import of ${ROWS} rows: longest GET /api wait ${max.toFixed(0)} ms over ${polls} polls`,
    );
    expect(polls).toBeGreaterThan(10);
    expect(max).toBeLessThanOrEqual(MAX_WAIT_MS);
  }, 600_000);

  it('filling a campaign from a search segment that matches every one of those voters', async () => {
    const owner = importer!;
    await t.db.kysely
      .updateTable('credit_balances')
      .set({ balance: 10_000_000 })
      .where('workspace_id', '=', owner.user.workspace_id)
      .execute();
    const segment = await call(t.app, 'POST', '/api/segments', {
      token: owner.token,
      body: { name: 'Everyone named Voter', filters: { search: 'Voter' } },
    });
    expect(segment.status).toBe(201);
    const broadcast = await call(t.app, 'POST', '/api/messages/broadcast', {
      token: owner.token,
      body: { channel: 'email', subject: 'x', message: 'x', segment_id: segment.body.data.id },
    });
    // Email: the voters have no address, so the fill reads every range and writes nothing; sms would fill.
    expect(broadcast.status === 202 || broadcast.status === 422).toBe(true);
    const sms = await call(t.app, 'POST', '/api/messages/broadcast', {
      token: owner.token,
      body: { channel: 'sms', message: 'Rally', segment_id: segment.body.data.id },
    });
    expect(sms.status).toBe(202);
    const worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
    const { max, polls } = await longestWait(async () => {
      while (await worker.campaigns.fillNext()) {
        /* every queued campaign */
      }
    });
    const filled = await t.db.kysely
      .selectFrom('messages')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('campaign_id', '=', Number(String(sms.body.data.campaign_id).slice(5)))
      .executeTakeFirstOrThrow();
    expect(Number(filled.n)).toBe(ROWS);
    console.log(
      `segment fill of ${ROWS} voters: longest GET /api wait ${max.toFixed(0)} ms over ${polls} polls`,
    );
    expect(polls).toBeGreaterThan(5);
    expect(max).toBeLessThanOrEqual(MAX_WAIT_MS);
  }, 300_000);

  it('an opt-out import of 10 MB', async () => {
    const owner = await register(t.app);
    let answer: Awaited<ReturnType<typeof upload>> | undefined;
    const { max, polls } = await longestWait(async () => {
      answer = await upload(owner.token, '/api/opt-outs/import', {
        kind: 'opt-outs',
        bytes: 10 * 1024 * 1024,
      });
    });
    expect(answer?.status).toBe(200);
    expect(answer?.body.data.created).toBe(answer?.rows);
    console.log(
      `opt-out import of ${answer?.rows} rows: longest GET /api wait ${max.toFixed(0)} ms over ${polls} polls`,
    );
    expect(polls).toBeGreaterThan(10);
    expect(max).toBeLessThanOrEqual(MAX_WAIT_MS);
  }, 300_000);
});
