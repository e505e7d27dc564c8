/**
 * The live stream and the callbacks under a hostile tenant (issue 36, the contract's fourth part, "Seams"): a
 * stream that does not read is closed, a demotion narrows an open stream, a callback body is bounded and applied
 * in slices, live_events is kept short without a worker, and concurrent changes have one winner.
 */
import { createHmac } from 'node:crypto';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordLive } from '../src/modules/events/live.ts';
import {
  type Account,
  addMember,
  buildTestApp,
  call,
  dialects,
  expectError,
  register,
  type TestApp,
  uniquePhone,
} from './helpers.ts';
import { until } from './messaging-helpers.ts';

const APP_SECRET = 'hostile-tenant-app-secret';
const sign = (raw: string) => `sha256=${createHmac('sha256', APP_SECRET).update(raw).digest('hex')}`;

async function listen(t: TestApp): Promise<string> {
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
}

/** A stream whose client reads nothing until `resume` (or never): bytes counts what it read once resumed. */
async function openStuckStream(base: string, token: string) {
  const state = { bytes: 0, ended: false, response: undefined as IncomingMessage | undefined };
  await new Promise<void>((resolve, reject) => {
    const req = httpRequest(
      `${base}/api/events/stream`,
      { headers: { authorization: `Bearer ${token}` } },
      (res) => {
        state.response = res;
        res.pause();
        res.on('data', (chunk: Buffer) => (state.bytes += chunk.length));
        const done = () => (state.ended = true);
        res.on('end', done);
        res.on('error', done);
        res.on('close', done);
        resolve();
      },
    );
    req.on('error', (error) => (state.response ? (state.ended = true) : reject(error)));
    req.end();
  });
  return {
    state,
    resume: () => state.response!.resume(),
    close: () => state.response!.destroy(),
  };
}

/** A WhatsApp Cloud API webhook body (Meta's documented shape) carrying `count` text replies of `size` bytes. */
function repliesBody(count: number, size: number, tag: string): string {
  const messages = Array.from({ length: count }, (_, i) => ({
    from: `9198${String(i % 100_000).padStart(8, '0')}`,
    id: `wamid.${tag}.${i}`,
    timestamp: '1764093000',
    type: 'text',
    text: { body: `${tag} ${i} `.padEnd(size, 'x') },
  }));
  return JSON.stringify({
    object: 'whatsapp_business_account',
    entry: [
      {
        id: '102290129340398',
        changes: [
          {
            field: 'messages',
            value: {
              messaging_product: 'whatsapp',
              metadata: { display_phone_number: '15550001234', phone_number_id: '106540352242922' },
              messages,
            },
          },
        ],
      },
    ],
  });
}

/** The worst wait of `probe` requests sent one after another until `stop()`, each timed. */
function measureWaits(probe: () => Promise<unknown>) {
  let stopped = false;
  let worst = 0;
  let count = 0;
  const running = (async () => {
    while (!stopped) {
      const started = performance.now();
      await probe();
      worst = Math.max(worst, performance.now() - started);
      count += 1;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await running;
      return { worst, count };
    },
  };
}

for (const dialect of dialects) {
  describe(`the live stream and callbacks under a hostile tenant (${dialect})`, () => {
    let t: TestApp;
    let base: string;
    beforeAll(async () => {
      t = await buildTestApp(dialect, { EVENT_STREAM_BUFFER_KB: '16', EVENT_STREAMS_PER_USER: '50' });
      base = await listen(t);
    });
    afterAll(() => t?.close());

    const whatsappAccount = async (owner: Account) => {
      const created = await call(t.app, 'POST', '/api/channel-accounts', {
        token: owner.token,
        body: {
          name: 'WhatsApp',
          provider: 'whatsapp_cloud',
          settings: { phone_number_id: '106540352242922', waba_id: '102290129340398' },
          credentials: { access_token: 'EAAG-test-token', app_secret: APP_SECRET },
        },
      });
      expect(created.status).toBe(201);
      return new URL(created.body.data.callback_urls.webhook as string).pathname;
    };
    const postSigned = (path: string, raw: string) =>
      call(t.app, 'POST', path, {
        body: raw,
        headers: { 'content-type': 'application/json', 'x-hub-signature-256': sign(raw) },
      });
    const liveCount = async (workspaceId: number) =>
      Number(
        (
          await t.db.kysely
            .selectFrom('live_events')
            .select((eb) => eb.fn.countAll().as('n'))
            .where('workspace_id', '=', workspaceId)
            .executeTakeFirstOrThrow()
        ).n,
      );

    it('a stream whose client does not read is closed at EVENT_STREAM_BUFFER_KB, and resumes with Last-Event-ID', async () => {
      const owner = await register(t.app);
      const ws = owner.user.workspace_id as number;
      const stuck = await openStuckStream(base, owner.token);
      // 2,000 events of 4.5 KB: 9 MB, far past what the socket buffers of loopback hold.
      const body = 'x'.repeat(4500);
      for (let i = 0; i < 2000; i += 1)
        await recordLive(t.db.kysely, ws, 'grievance.created', { i, body }, null, new Date().toISOString());
      // The server gave up on it: once the client reads again, it finds the stream ended, short of the 9 MB.
      await new Promise((resolve) => setTimeout(resolve, 300));
      stuck.resume();
      await until(async () => stuck.state.ended, 'the server to have closed the stream', 10_000);
      expect(stuck.state.bytes).toBeLessThan(2000 * 4500);
      stuck.close();
    });

    it("a demoted manager's open stream narrows within 5 s: a volunteer's stream carries only their conversations", async () => {
      const owner = await register(t.app);
      const manager = await addMember(t.app, owner, 'manager');
      const received: string[] = [];
      const controller = new AbortController();
      const res = await fetch(`${base}/api/events/stream`, {
        headers: { authorization: `Bearer ${manager.token}` },
        signal: controller.signal,
      });
      void (async () => {
        const decoder = new TextDecoder();
        try {
          for await (const chunk of res.body!) received.push(decoder.decode(chunk as Uint8Array));
        } catch {
          // aborted
        }
      })();
      const reply = (body: string) =>
        call(t.app, 'POST', '/api/inbound', {
          token: owner.token,
          body: { channel: 'sms', from: uniquePhone(), body },
        });
      await reply('before the demotion');
      await until(async () => received.join('').includes('before the demotion'), 'the manager to hear it');
      const demoted = await call(t.app, 'PATCH', `/api/users/${manager.user.id}`, {
        token: owner.token,
        body: { role: 'volunteer' },
      });
      expect(demoted.status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 5500));
      await reply('after the demotion');
      await reply('a marker for the owner');
      // Wait for a later event to have been delivered everywhere (the owner's view) before looking.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(received.join('')).not.toContain('after the demotion');
      controller.abort();
    }, 30_000);

    it('a callback body of more than 1,000 messages is 413 and applies nothing; 1,000 are applied while another workspace is served', async () => {
      const hostile = await register(t.app);
      const path = await whatsappAccount(hostile);
      const tooMany = await postSigned(path, repliesBody(1001, 20, 'flood'));
      expectError(tooMany, 413, 'payload_too_large');
      expect(tooMany.body.message).toContain('at most 1000');
      const inbound = await call(t.app, 'GET', '/api/messages/inbound', { token: hostile.token });
      expect(inbound.body.data.data).toEqual([]);

      const other = await register(t.app);
      const waits = measureWaits(() => call(t.app, 'GET', '/api/voters?per_page=5', { token: other.token }));
      const body = repliesBody(1000, 600, 'body');
      expect(body.length).toBeGreaterThan(600_000);
      const applied = await postSigned(path, body);
      const { worst, count } = await waits.stop();
      expect(applied.status).toBe(200);
      expect(applied.body.data.applied).toBe(1000);
      expect(count).toBeGreaterThan(1);
      // The contract: slices of at most 100 ms on SQLite; the bound for the other workspace is 1 s.
      expect(worst).toBeLessThan(1000);
    }, 60_000);

    it('live_events keeps the last 1,000 events of each workspace and nothing older than a day, with no worker running', async () => {
      const owner = await register(t.app);
      const ws = owner.user.workspace_id as number;
      const dayAgo = new Date(Date.now() - 86_400_000 - 60_000).toISOString();
      await t.db.kysely
        .insertInto('live_events')
        .values({
          workspace_id: ws,
          type: 'grievance.created',
          data: '{}',
          assigned_to: null,
          created_at: dayAgo,
        })
        .execute();
      const now = new Date().toISOString();
      for (let i = 0; i < 1500; i += 1)
        await recordLive(t.db.kysely, ws, 'grievance.created', { i }, null, now);
      await until(async () => (await liveCount(ws)) <= 1000, 'the hub to cut the workspace back', 10_000);
      const left = await t.db.kysely
        .selectFrom('live_events')
        .select(['data', 'created_at'])
        .where('workspace_id', '=', ws)
        .orderBy('id')
        .execute();
      expect(left).toHaveLength(1000);
      expect(JSON.parse(left[0]!.data)).toEqual({ i: 500 });
      expect(JSON.parse(left.at(-1)!.data)).toEqual({ i: 1499 });
    });

    it('concurrent POST .../grievance on one conversation create one grievance; the others are 409', async () => {
      const owner = await register(t.app);
      const phone = uniquePhone();
      await call(t.app, 'POST', '/api/voters', { token: owner.token, body: { name: 'Ravi Kumar', phone } });
      await call(t.app, 'POST', '/api/inbound', {
        token: owner.token,
        body: { channel: 'sms', from: phone, body: 'The drain on our street is blocked' },
      });
      const list = await call(t.app, 'GET', '/api/conversations', { token: owner.token });
      const id = list.body.data.data[0].id as string;
      const answers = await Promise.all(
        Array.from({ length: 6 }, () =>
          call(t.app, 'POST', `/api/conversations/${id}/grievance`, { token: owner.token, body: {} }),
        ),
      );
      const statuses = answers.map((a) => a.status).sort();
      expect(statuses).toEqual([201, 409, 409, 409, 409, 409]);
      for (const answer of answers.filter((a) => a.status === 409)) expectError(answer, 409, 'conflict');
      const grievances = await call(t.app, 'GET', '/api/grievances', { token: owner.token });
      expect(grievances.body.data.data).toHaveLength(1);
    });

    it('reading a thread clears unread_count only up to the newest message returned', async () => {
      const owner = await register(t.app);
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const phone = uniquePhone();
      await call(t.app, 'PATCH', `/api/users/${volunteer.user.id}`, {
        token: owner.token,
        body: { coverage: { wards: ['7'] } },
      });
      await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Meena', phone, ward: '7' },
      });
      for (const body of ['first', 'second', 'third'])
        await call(t.app, 'POST', '/api/inbound', {
          token: owner.token,
          body: { channel: 'sms', from: phone, body },
        });
      const mine = await call(t.app, 'GET', '/api/conversations', { token: volunteer.token });
      expect(mine.body.data.data[0].unread_count).toBe(3);
      const id = mine.body.data.data[0].id as string;
      // The first page holds the oldest message only: the two after it are still unread.
      const page = await call(t.app, 'GET', `/api/conversations/${id}/messages?per_page=1`, {
        token: volunteer.token,
      });
      expect(page.body.data.data.map((m: { body: string }) => m.body)).toEqual(['first']);
      const after = await call(t.app, 'GET', `/api/conversations/${id}`, { token: volunteer.token });
      expect(after.body.data.unread_count).toBe(2);
      await call(t.app, 'GET', `/api/conversations/${id}/messages?per_page=100`, { token: volunteer.token });
      expect(
        (await call(t.app, 'GET', `/api/conversations/${id}`, { token: volunteer.token })).body.data
          .unread_count,
      ).toBe(0);
    });

    it('a conversation whose contact later becomes a voter is linked to that voter (added, or imported)', async () => {
      const owner = await register(t.app);
      const [added, imported] = [uniquePhone(), uniquePhone()];
      for (const from of [added, imported])
        await call(t.app, 'POST', '/api/inbound', {
          token: owner.token,
          body: { channel: 'sms', from, body: 'Hello' },
        });
      const before = await call(t.app, 'GET', '/api/conversations', { token: owner.token });
      expect(before.body.data.data.map((c: { voter_id: unknown }) => c.voter_id)).toEqual([null, null]);
      const voter = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Later Voter', phone: added, ward: '3' },
      });
      const csv = `name,phone,ward\nImported Voter,${imported},4\n`;
      const boundary = 'ces-boundary';
      const upload = await call(t.app, 'POST', '/api/voters/import', {
        token: owner.token,
        body: `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="v.csv"\r\nContent-Type: text/csv\r\n\r\n${csv}\r\n--${boundary}--\r\n`,
        headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
      });
      expect([200, 201, 202]).toContain(upload.status);
      await until(async () => {
        const list = await call(t.app, 'GET', '/api/conversations', { token: owner.token });
        return list.body.data.data.every((c: { voter_id: unknown }) => c.voter_id !== null);
      }, 'both conversations to be linked');
      const list = await call(t.app, 'GET', '/api/conversations', { token: owner.token });
      const byAddress = new Map(list.body.data.data.map((c: { address: string }) => [c.address, c]));
      expect(byAddress.get(added)).toMatchObject({ voter_id: voter.body.data.id });
    });
  });
}

describe('a hostile tenant against the whole process (sqlite)', () => {
  let t: TestApp;
  let base: string;
  beforeAll(async () => {
    t = await buildTestApp('sqlite', { EVENT_STREAMS_PER_USER: '50' });
    base = await listen(t);
  });
  afterAll(() => t?.close());

  it('40 streams that never read and 3,900 signed replies of 4.5 KB: the process lives and another workspace waits under 1 s', async () => {
    const hostile = await register(t.app);
    const created = await call(t.app, 'POST', '/api/channel-accounts', {
      token: hostile.token,
      body: {
        name: 'WhatsApp',
        provider: 'whatsapp_cloud',
        settings: { phone_number_id: '106540352242922', waba_id: '102290129340398' },
        credentials: { access_token: 'EAAG-test-token', app_secret: APP_SECRET },
      },
    });
    const path = new URL(created.body.data.callback_urls.webhook as string).pathname;
    const streams = await Promise.all(Array.from({ length: 40 }, () => openStuckStream(base, hostile.token)));
    const other = await register(t.app);
    const heapBefore = process.memoryUsage().heapUsed;
    const waits = measureWaits(() => call(t.app, 'GET', '/api/voters?per_page=5', { token: other.token }));
    let heapPeak = heapBefore;
    for (let body = 0; body < 39; body += 1) {
      const raw = repliesBody(100, 4500, `b${body}`);
      const answer = await call(t.app, 'POST', path, {
        body: raw,
        headers: { 'content-type': 'application/json', 'x-hub-signature-256': sign(raw) },
      });
      expect(answer.status).toBe(200);
      heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed);
    }
    const { worst } = await waits.stop();
    expect(worst).toBeLessThan(1000);
    const stored = await call(t.app, 'GET', '/api/messages/inbound?per_page=1', { token: hostile.token });
    expect(stored.body.data.total).toBe(3900);
    // 40 streams x 3,900 events x 4.5 KB would be 700 MB buffered; each stream is cut at 256 KB instead.
    expect(heapPeak - heapBefore).toBeLessThan(300 * 1024 * 1024);
    for (const stream of streams) stream.resume();
    await until(
      async () => streams.every((s) => s.state.ended),
      'every stuck stream to have been closed',
      20_000,
    );
    for (const stream of streams) stream.close();
  }, 120_000);
});
