import type { AddressInfo } from 'node:net';
import { type ChildProcess, spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, waitUntilUp } from '../bench/server.ts';
import { connect, type Db } from '../src/db/connect.ts';
import { addMember, buildTestApp, call, dialects, register, uniquePhone, type TestApp } from './helpers.ts';
import { until } from './messaging-helpers.ts';
import { EventHub, recordLive } from '../src/modules/events/live.ts';
import { listen, openStream } from './stream-helpers.ts';

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

    it('the hub deletes events older than a day, with no stream open and no worker', async () => {
      const owner = await register(t.app);
      const ws = owner.user.workspace_id;
      const at = (hours: number) => new Date(Date.now() - hours * 3_600_000).toISOString();
      const event = (created_at: string) => ({
        workspace_id: ws,
        type: 'grievance.created',
        data: '{}',
        assigned_to: null,
        created_at,
      });
      await t.db.kysely
        .insertInto('live_events')
        .values([event(at(48)), event(at(25)), event(at(2))])
        .execute();
      const hub = new EventHub(t.db.kysely, t.config.databaseUrl);
      await hub.prune();
      hub.close();
      const left = await t.db.kysely
        .selectFrom('live_events')
        .select('created_at')
        .where('workspace_id', '=', ws)
        .execute();
      expect(left).toHaveLength(1);
      expect(Date.parse(String(left[0]!.created_at))).toBeGreaterThan(Date.now() - 3 * 3_600_000);
    });
  });
}

describe.runIf(dialects.includes('postgres'))('events cross API processes (postgres)', () => {
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

/**
 * Two real OS processes on PostgreSQL: the API server (a child process) holds the stream; this process writes
 * events, one of them in a transaction held open for 8 s while 250 newer ones commit. Each reaches the stream
 * once, the late one when it commits (a poll of the newest ids would never see it: it is 250 ids back).
 */
describe.runIf(dialects.includes('postgres'))('events pushed across OS processes (postgres)', () => {
  let server: ChildProcess | undefined;
  let db: Db | undefined;
  afterAll(async () => {
    server?.kill('SIGKILL');
    await db?.close();
  });

  it('a late commit, 250 ids behind, reaches a stream on another process once, when it commits', async () => {
    const url = process.env.TEST_DATABASE_URL!;
    const port = await freePort();
    server = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
      env: {
        ...process.env,
        DATABASE_URL: url,
        PORT: String(port),
        HOST: '127.0.0.1',
        APP_KEY: 'ab'.repeat(32),
        LOG_LEVEL: 'warn',
        WORKER_IN_PROCESS: 'false',
        EXPORT_THREADS: '0',
        RATE_LIMIT_AUTH_PER_MIN: '1000',
        RATE_LIMIT_AUTH_IP_PER_MIN: '1000',
      },
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    const base = `http://127.0.0.1:${port}`;
    await waitUntilUp(`${base}/api/healthz`);
    const registered = await fetch(`${base}/api/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        name: 'Two Processes',
        email: `two.${Date.now()}@example.com`,
        password: 'correct horse battery',
        phone: uniquePhone(),
      }),
    });
    const auth = (
      (await registered.json()) as { data: { access_token: string; user: { workspace_id: number } } }
    ).data;
    const stream = await openStream(base, auth.access_token);
    expect(stream.status).toBe(200);
    db = connect(url);
    const ws = auth.user.workspace_id;
    const now = () => new Date().toISOString();
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let written!: () => void;
    const inserted = new Promise<void>((resolve) => (written = resolve));
    const late = db.kysely.transaction().execute(async (trx) => {
      await recordLive(trx, ws, 'grievance.created', { n: 'late' }, null, now());
      written();
      await held;
    });
    await inserted;
    for (let i = 0; i < 250; i += 1)
      await recordLive(db.kysely, ws, 'grievance.created', { n: i }, null, now());
    await until(async () => stream.events.length >= 250, 'the 250 committed events');
    await new Promise((resolve) => setTimeout(resolve, 8000));
    expect(stream.events.some((e) => e.data.n === 'late')).toBe(false);
    release();
    await late;
    await until(async () => stream.events.length >= 251, 'the late commit');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(stream.events.map((e) => e.data.n)).toEqual([...Array.from({ length: 250 }, (_, i) => i), 'late']);
    expect(new Set(stream.events.map((e) => e.id)).size).toBe(251);
    stream.close();
  }, 60_000);
});
