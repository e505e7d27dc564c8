import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, buildTestApp, call, dialects, register, uniquePhone, type TestApp } from './helpers.ts';
import { until } from './messaging-helpers.ts';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { EventHub } from '../src/modules/events/live.ts';

interface Received {
  id: string;
  type: string;
  data: Record<string, unknown>;
}

/** A real SSE client over HTTP: the events received, whether the server ended the stream, and a way to leave. */
async function openStream(base: string, token: string, lastEventId?: string) {
  const controller = new AbortController();
  const res = await fetch(`${base}/api/events/stream`, {
    headers: { authorization: `Bearer ${token}`, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
    signal: controller.signal,
  });
  const events: Received[] = [];
  const state = { ended: false };
  if (res.ok && res.body) {
    void (async () => {
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let buffer = '';
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          for (let at = buffer.indexOf('\n\n'); at >= 0; at = buffer.indexOf('\n\n')) {
            const block = buffer.slice(0, at);
            buffer = buffer.slice(at + 2);
            const event: Partial<Received> = {};
            for (const line of block.split('\n')) {
              if (line.startsWith('id: ')) event.id = line.slice(4);
              else if (line.startsWith('event: ')) event.type = line.slice(7);
              else if (line.startsWith('data: '))
                event.data = JSON.parse(line.slice(6)) as Record<string, unknown>;
            }
            if (event.type) events.push(event as Received);
          }
        }
      } catch {
        // aborted by the test
      }
      state.ended = true;
    })();
  }
  return { status: res.status, headers: res.headers, events, state, close: () => controller.abort() };
}

async function listen(t: TestApp): Promise<string> {
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
}

for (const dialect of dialects) {
  describe(`GET /api/events/stream (${dialect})`, () => {
    let t: TestApp;
    let base: string;
    beforeAll(async () => {
      t = await buildTestApp(dialect, { EVENT_STREAMS_PER_USER: '2' });
      base = await listen(t);
    });
    afterAll(() => t?.close());

    it("streams the workspace's events each may see, resumes after Last-Event-ID, and ends when the token is revoked", async () => {
      const owner = await register(t.app);
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const other = await addMember(t.app, owner, 'volunteer');
      await call(t.app, 'PATCH', `/api/users/${volunteer.user.id}`, {
        token: owner.token,
        body: { coverage: { wards: ['5'] } },
      });
      const [covered, stranger] = [uniquePhone(), uniquePhone()];
      await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Covered Voter', phone: covered, ward: '5' },
      });

      const staff = await openStream(base, owner.token);
      expect(staff.status).toBe(200);
      expect(staff.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const mine = await openStream(base, volunteer.token);
      const theirs = await openStream(base, other.token);
      // Another workspace's stream hears nothing of this one.
      const elsewhere = await register(t.app);
      const outside = await openStream(base, elsewhere.token);

      await call(t.app, 'POST', '/api/inbound', {
        token: owner.token,
        body: { channel: 'sms', from: covered, body: 'Water?' },
      });
      await call(t.app, 'POST', '/api/inbound', {
        token: owner.token,
        body: { channel: 'sms', from: stranger, body: 'Hello' },
      });
      await until(async () => staff.events.length >= 5, 'the staff stream to hear both conversations');
      expect(staff.events.map((e) => e.type)).toEqual([
        'conversation.created',
        'conversation.assigned',
        'message.received',
        'conversation.created',
        'message.received',
      ]);
      expect(staff.events[0]!.data).toMatchObject({ address: covered, assigned_to: volunteer.user.id });
      await until(async () => mine.events.length >= 3, "the volunteer's stream to hear their conversation");
      expect(mine.events.map((e) => [e.type, (e.data.address ?? e.data.from) as string])).toEqual([
        ['conversation.created', covered],
        ['conversation.assigned', covered],
        ['message.received', covered],
      ]);
      expect(theirs.events).toEqual([]);
      expect(outside.events).toEqual([]);

      // Resuming after the first event gives the rest, in order.
      const resumed = await openStream(base, owner.token, staff.events[0]!.id);
      await until(async () => resumed.events.length >= 4, 'the resumed stream to catch up');
      expect(resumed.events.map((e) => e.id)).toEqual(staff.events.slice(1).map((e) => e.id));
      resumed.close();

      // EVENT_STREAMS_PER_USER (2 here): a third is 429.
      const second = await openStream(base, volunteer.token);
      const third = await openStream(base, volunteer.token);
      expect(third.status).toBe(429);
      second.close();

      // Logout revokes the token: its stream ends.
      await call(t.app, 'POST', '/api/auth/logout', { token: volunteer.token });
      await until(async () => mine.state.ended, 'the revoked stream to end', 20_000);
      for (const s of [staff, theirs, outside]) s.close();
    }, 60_000);

    it('a hub whose first read failed starts again at the next stream (not every stream ending until a restart)', async () => {
      let fail = true;
      const flaky = new Proxy(t.db.kysely, {
        get(target, prop) {
          if (prop === 'selectFrom' && fail) {
            fail = false;
            return () => {
              throw new Error('database away');
            };
          }
          const value = Reflect.get(target, prop, target) as unknown;
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      });
      const hub = new EventHub(flaky);
      const listener = { workspaceId: 1, viewer: { userId: 1, role: 'politician' as const }, send: () => {} };
      await expect(hub.add(listener, undefined)).rejects.toThrow('database away');
      await hub.add(listener, undefined);
      expect(hub.count()).toBe(1);
      hub.close();
    });

    it('the worker deletes events older than an hour, with no stream open', async () => {
      const owner = await register(t.app);
      const ws = owner.user.workspace_id;
      const at = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();
      const event = (created_at: string) => ({
        workspace_id: ws,
        type: 'grievance.created',
        data: '{}',
        assigned_to: null,
        created_at,
      });
      await t.db.kysely
        .insertInto('live_events')
        .values([event(at(120)), event(at(61)), event(at(5))])
        .execute();
      await new DeliveryWorker({
        db: t.db,
        config: t.config,
        providers: t.providers,
        log: pino({ level: 'silent' }),
      }).round();
      const left = await t.db.kysely
        .selectFrom('live_events')
        .select('created_at')
        .where('workspace_id', '=', ws)
        .execute();
      expect(left).toHaveLength(1);
      expect(Date.parse(String(left[0]!.created_at))).toBeGreaterThan(Date.now() - 10 * 60_000);
    });
  });
}

describe.runIf(process.env.TEST_DATABASE_URL)('events cross API processes (postgres)', () => {
  let a: TestApp;
  let b: TestApp;
  beforeAll(async () => {
    a = await buildTestApp('postgres');
    b = await buildTestApp('postgres');
    await listen(b);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  it('a reply taken by one API process reaches a stream held by another', async () => {
    const owner = await register(a.app);
    const address = b.app.server.address() as AddressInfo;
    const stream = await openStream(`http://127.0.0.1:${address.port}`, owner.token);
    const from = uniquePhone();
    await call(a.app, 'POST', '/api/inbound', {
      token: owner.token,
      body: { channel: 'whatsapp', from, body: 'Hi' },
    });
    await until(
      async () => stream.events.some((e) => e.type === 'message.received'),
      'the event on the other process',
    );
    expect(stream.events.find((e) => e.type === 'message.received')!.data).toMatchObject({
      from,
      body: 'Hi',
    });
    stream.close();
  });
});
