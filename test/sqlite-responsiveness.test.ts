import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, register, type TestApp } from './helpers.ts';

/**
 * On SQLite every statement runs on the process's one thread: a bulk step that does not let other requests
 * through freezes every workspace (a 200,000-row import held `GET /api` for 5.9 s). This polls `GET /api` over
 * real HTTP while another workspace's bulk work runs, and takes the longest wait. The goal is 100 ms per
 * synchronous step; the test allows 250 ms on a shared machine, as the issue does.
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

const ROWS = Number(process.env.RESPONSIVENESS_ROWS ?? 200_000);
const MAX_WAIT_MS = 250;

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

  async function upload(token: string, path: string, csv: string): Promise<Response> {
    const form = new FormData();
    form.append('file', new Blob([csv], { type: 'text/csv' }), 'file.csv');
    return fetch(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      body: form,
    });
  }

  it(`a ${ROWS.toLocaleString('en')}-row voter import`, async () => {
    const owner = await register(t.app);
    let csv = 'name,phone,constituency,booth,ward\n';
    for (let i = 0; i < ROWS; i++) {
      csv += `Voter ${i},+9198${String(i).padStart(8, '0')},Constituency ${i % 300},${i % 1000},${i % 50}\n`;
    }
    let status = 0;
    const { max, polls } = await longestWait(async () => {
      const res = await upload(owner.token, '/api/voters/import', csv);
      status = res.status;
      const body = (await res.json()) as { data: { imported: number } };
      expect(body.data.imported).toBe(ROWS);
    });
    expect(status).toBe(200);
    console.log(
      `voter import of ${ROWS} rows: longest GET /api wait ${max.toFixed(0)} ms over ${polls} polls`,
    );
    expect(polls).toBeGreaterThan(10);
    expect(max).toBeLessThanOrEqual(MAX_WAIT_MS);
  }, 300_000);

  it('an opt-out import of 10 MB', async () => {
    const owner = await register(t.app);
    let csv = 'address,channel,reason\n';
    for (let i = 0; csv.length < 10 * 1024 * 1024 - 100; i++) {
      csv += `+9197${String(i).padStart(8, '0')},sms,asked\n`;
    }
    const lines = csv.split('\n').length - 2;
    const { max, polls } = await longestWait(async () => {
      const res = await upload(owner.token, '/api/opt-outs/import', csv);
      const body = (await res.json()) as { data: { created: number } };
      expect(res.status).toBe(200);
      expect(body.data.created).toBe(lines);
    });
    console.log(
      `opt-out import of ${lines} rows: longest GET /api wait ${max.toFixed(0)} ms over ${polls} polls`,
    );
    expect(polls).toBeGreaterThan(10);
    expect(max).toBeLessThanOrEqual(MAX_WAIT_MS);
  }, 300_000);
});
