import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { smsSegments } from '../src/lib/sms.ts';
import { IdempotencyService } from '../src/modules/idempotency/idempotency.service.ts';
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
import pino from 'pino';
import { isolatedDatabase } from './messaging-helpers.ts';

const silent = pino({ level: 'silent' });

describe('SMS segments', () => {
  it('counts GSM-7 as 160 alone and 153 per part, extension characters as two', () => {
    expect(smsSegments('a'.repeat(160))).toBe(1);
    expect(smsSegments('a'.repeat(161))).toBe(2);
    expect(smsSegments('a'.repeat(306))).toBe(2);
    expect(smsSegments('a'.repeat(307))).toBe(3);
    expect(smsSegments('{'.repeat(80))).toBe(1);
    expect(smsSegments('{'.repeat(81))).toBe(2);
    expect(smsSegments('Price: 10€ [today] ~ok')).toBe(1);
  });
  it('counts anything else (Devanagari, emoji) as UCS-2: 70 alone, 67 per part', () => {
    expect(smsSegments('न'.repeat(70))).toBe(1);
    expect(smsSegments('न'.repeat(71))).toBe(2);
    expect(smsSegments('न'.repeat(134))).toBe(2);
    expect(smsSegments('न'.repeat(135))).toBe(3);
    expect(smsSegments('a'.repeat(69) + '😀')).toBe(2);
    expect(smsSegments('मतदान करें')).toBe(1);
  });
});

async function credits(t: TestApp, owner: Account) {
  return (await call(t.app, 'GET', '/api/user', { token: owner.token })).body.data.credits;
}

async function setBalance(t: TestApp, workspaceId: number, channel: string, balance: number) {
  await t.db.kysely
    .updateTable('credit_balances')
    .set({ balance })
    .where('workspace_id', '=', workspaceId)
    .where('channel', '=', channel as 'sms')
    .execute();
}

for (const dialect of dialects) {
  describe(`messages (${dialect})`, () => {
    let t: TestApp;
    let worker: DeliveryWorker;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      t = await buildTestApp(dialect, { ...database.env, SANDBOX_DELIVERY_DELAY_MS: '0', QUIET_HOURS: '' });
      worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
    });

    it('sends one message within the request and charges it', async () => {
      const owner = await register(t.app);
      const to = uniquePhone();
      const res = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to, message: 'Vote on Sunday' },
      });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ success: true, data: { status: 'sent', channel: 'sms', to } });
      expect(res.body.data.id).toMatch(/^msg_\d+$/);
      expect(t.providers.sms.sent.filter((m) => m.reference === res.body.data.id)).toHaveLength(1);
      expect((await credits(t, owner)).sms_credits).toBe(99);
      await worker.drain();
      const history = await call(t.app, 'GET', '/api/messages/history', { token: owner.token });
      expect(history.body.data).toMatchObject({ total: 1, current_page: 1, per_page: 15, last_page: 1 });
      expect(history.body.data.data[0]).toMatchObject({
        id: res.body.data.id,
        channel: 'sms',
        to,
        message: 'Vote on Sunday',
        status: 'delivered',
      });
      expect(history.body.data.data[0].sent_at).toMatch(/Z$/);
      expect(history.body.data.data[0].campaign_id).toBeNull();
    });

    it('charges SMS per segment, WhatsApp and email per message, IVR nothing', async () => {
      const owner = await register(t.app);
      const send = (body: object) => call(t.app, 'POST', '/api/messages/send', { token: owner.token, body });
      expect((await send({ channel: 'sms', to: uniquePhone(), message: 'a'.repeat(161) })).status).toBe(201);
      expect((await send({ channel: 'sms', to: uniquePhone(), message: 'न'.repeat(71) })).status).toBe(201);
      expect((await send({ channel: 'sms', to: uniquePhone(), message: 'न'.repeat(135) })).status).toBe(201);
      expect((await send({ channel: 'whatsapp', to: uniquePhone(), message: 'a'.repeat(1000) })).status).toBe(
        201,
      );
      const email = await send({
        channel: 'email',
        to: 'Voter@Example.com',
        message: 'Hi',
        subject: 'Rally',
      });
      expect(email.status).toBe(201);
      expect(email.body.data.to).toBe('voter@example.com');
      expect((await send({ channel: 'ivr', to: uniquePhone(), message: 'Hello' })).status).toBe(201);
      expect(await credits(t, owner)).toEqual({
        sms_credits: 100 - 7,
        whatsapp_credits: 99,
        email_credits: 99,
      });
    });

    it('refuses every invalid field of a send', async () => {
      const owner = await register(t.app);
      const send = (body: unknown) => call(t.app, 'POST', '/api/messages/send', { token: owner.token, body });
      const sentBefore = Object.values(t.providers).reduce((n, p) => n + p.sent.length, 0);
      const cases: Array<[unknown, string[]]> = [
        // `message` may be left out for a tpl_ template_id: its absence is reported once the body is valid.
        [{}, ['channel', 'to']],
        [{ channel: 'sms', to: '+919812345678' }, ['message']],
        [{ channel: 'fax', to: '+919812345678', message: 'x' }, ['channel']],
        [{ channel: 'sms', to: 'not a phone', message: 'x' }, ['to']],
        [{ channel: 'whatsapp', to: '12', message: 'x' }, ['to']],
        [{ channel: 'ivr', to: 'a@b.com', message: 'x' }, ['to']],
        [{ channel: 'email', to: '+919812345678', message: 'x' }, ['to']],
        [{ channel: 'sms', to: '+919812345678', message: '' }, ['message']],
        [{ channel: 'sms', to: '+919812345678', message: '   ' }, ['message']],
        [{ channel: 'sms', to: '+919812345678', message: 5 }, ['message']],
        [
          { channel: 'whatsapp', to: '+919812345678', message: 'x', media_url: 'http://x.com/a.png' },
          ['media_url'],
        ],
        [{ channel: 'whatsapp', to: '+919812345678', message: 'x', media_url: 'nope' }, ['media_url']],
        [{ channel: 'sms', to: '+919812345678', message: 'x', extra: 1 }, ['extra']],
        [{ channel: 'email', to: 'a@b.com', message: 'x', subject: '' }, ['subject']],
        [{ channel: 'sms', to: '+919812345678', message: 'x'.repeat(5001) }, ['message']],
      ];
      for (const [body, fields] of cases) {
        const res = await send(body);
        expectError(res, 422, 'validation_error');
        expect(Object.keys(res.body.details).sort(), JSON.stringify(body)).toEqual(fields.sort());
      }
      expectError(await send('{"channel":'), 400, 'bad_request');
      // Nothing reached any provider.
      expect(Object.values(t.providers).reduce((n, p) => n + p.sent.length, 0)).toBe(sentBefore);
      expect((await credits(t, owner)).sms_credits).toBe(100);
    });

    it('answers 402 with details and sends nothing when credits are short', async () => {
      const owner = await register(t.app);
      await setBalance(t, owner.user.workspace_id, 'sms', 1);
      const to = uniquePhone();
      const res = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to, message: 'a'.repeat(200) },
      });
      expectError(res, 402, 'insufficient_credits');
      expect(res.body.details).toEqual({ channel: 'sms', required: 2, available: 1 });
      expect(t.providers.sms.sent.some((m) => m.to === to)).toBe(false);
      const history = await call(t.app, 'GET', '/api/messages/history', { token: owner.token });
      expect(history.body.data.total).toBe(0);
    });

    it('never takes the balance below zero under concurrent sends on the last credits', async () => {
      const owner = await register(t.app);
      await setBalance(t, owner.user.workspace_id, 'whatsapp', 5);
      const results = await Promise.all(
        Array.from({ length: 20 }, () =>
          call(t.app, 'POST', '/api/messages/send', {
            token: owner.token,
            body: { channel: 'whatsapp', to: uniquePhone(), message: 'Last credits' },
          }),
        ),
      );
      expect(results.filter((r) => r.status === 201)).toHaveLength(5);
      expect(results.filter((r) => r.status === 402)).toHaveLength(15);
      expect((await credits(t, owner)).whatsapp_credits).toBe(0);
      const ledger = await t.db.kysely
        .selectFrom('credit_ledger')
        .select(['kind', 'amount'])
        .where('workspace_id', '=', owner.user.workspace_id)
        .where('channel', '=', 'whatsapp')
        .execute();
      expect(ledger.filter((l) => l.kind === 'reserve')).toHaveLength(5);
    });

    it('a failed message refunds its credits and never moves backwards', async () => {
      const owner = await register(t.app);
      const ok = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: uniquePhone(), message: 'ok' },
      });
      const bad = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: '+919812340000', message: 'will fail' },
      });
      expect(bad.status).toBe(201);
      expect((await credits(t, owner)).sms_credits).toBe(98);
      await worker.drain();
      expect((await credits(t, owner)).sms_credits).toBe(99);
      const okId = Number(ok.body.data.id.slice(4));
      const badId = Number(bad.body.data.id.slice(4));
      // Late and repeated reports change nothing, and refund nothing twice.
      await worker.messages.applyReports([
        { messageId: okId, status: 'failed' },
        { messageId: badId, status: 'delivered' },
        { messageId: badId, status: 'failed' },
      ]);
      const history = await call(t.app, 'GET', '/api/messages/history', { token: owner.token });
      const byId = Object.fromEntries(
        history.body.data.data.map((m: { id: string; status: string }) => [m.id, m.status]),
      );
      expect(byId).toEqual({ [ok.body.data.id]: 'delivered', [bad.body.data.id]: 'failed' });
      expect((await credits(t, owner)).sms_credits).toBe(99);
    });

    it('Idempotency-Key: a repeat returns the first answer, another body is 422, in flight is 409', async () => {
      const owner = await register(t.app);
      const to = uniquePhone();
      const body = { channel: 'sms', to, message: 'Once only' };
      const headers = { 'idempotency-key': 'key-1' };
      const first = await call(t.app, 'POST', '/api/messages/send', { token: owner.token, body, headers });
      const again = await call(t.app, 'POST', '/api/messages/send', { token: owner.token, body, headers });
      expect(first.status).toBe(201);
      expect(again.status).toBe(201);
      expect(again.body).toEqual(first.body);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(t.providers.sms.sent.filter((m) => m.to === to)).toHaveLength(1);
      expect((await credits(t, owner)).sms_credits).toBe(99);
      const other = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { ...body, message: 'Something else' },
        headers,
      });
      expectError(other, 422, 'validation_error');
      // Another workspace may use the same key.
      const stranger = await register(t.app);
      expect(
        (await call(t.app, 'POST', '/api/messages/send', { token: stranger.token, body, headers })).status,
      ).toBe(201);
      // A first request still in flight.
      const inflight = { channel: 'sms', to: uniquePhone(), message: 'In flight' };
      const now = new Date().toISOString();
      await t.db.kysely
        .insertInto('idempotency_keys')
        .values({
          workspace_id: owner.user.workspace_id,
          key: 'key-2',
          request_hash: IdempotencyService.fingerprint('POST', '/messages/send', inflight),
          status: 'in_flight',
          created_at: now,
          updated_at: now,
        })
        .execute();
      expectError(
        await call(t.app, 'POST', '/api/messages/send', {
          token: owner.token,
          body: inflight,
          headers: { 'idempotency-key': 'key-2' },
        }),
        409,
        'conflict',
      );
      // A request refused before anything happened frees its key.
      const invalid = { channel: 'sms', to: 'nope', message: 'x' };
      const h3 = { 'idempotency-key': 'key-3' };
      expectError(
        await call(t.app, 'POST', '/api/messages/send', { token: owner.token, body: invalid, headers: h3 }),
        422,
        'validation_error',
      );
      expect(
        (
          await call(t.app, 'POST', '/api/messages/send', {
            token: owner.token,
            body: { ...invalid, to: uniquePhone() },
            headers: h3,
          })
        ).status,
      ).toBe(201);
    });

    it('history filters by channel, status and inclusive dates, newest first, own workspace only', async () => {
      const owner = await register(t.app);
      const other = await register(t.app);
      const send = (token: string, body: object) =>
        call(t.app, 'POST', '/api/messages/send', { token, body });
      const a = await send(owner.token, { channel: 'sms', to: uniquePhone(), message: 'one' });
      const b = await send(owner.token, { channel: 'whatsapp', to: uniquePhone(), message: 'two' });
      const c = await send(owner.token, { channel: 'sms', to: '+919811110000', message: 'three' });
      await send(other.token, { channel: 'sms', to: uniquePhone(), message: 'not yours' });
      await worker.drain();
      const get = async (q: string) =>
        (await call(t.app, 'GET', `/api/messages/history${q}`, { token: owner.token })).body.data;
      expect((await get('')).data.map((m: { id: string }) => m.id)).toEqual(
        [c, b, a].map((r) => r.body.data.id),
      );
      expect((await get('?channel=sms')).total).toBe(2);
      expect((await get('?status=failed')).data.map((m: { id: string }) => m.id)).toEqual([c.body.data.id]);
      const today = new Date().toISOString().slice(0, 10);
      expect((await get(`?date_from=${today}&date_to=${today}`)).total).toBe(3);
      expect((await get('?date_to=2020-01-01')).total).toBe(0);
      expect((await get(`?date_from=${new Date(Date.now() + 60_000).toISOString()}`)).total).toBe(0);
      expect((await get('?per_page=1&page=2')).data[0].id).toBe(b.body.data.id);
      // The far ends of the calendar are answers, not 500s (PostgreSQL refuses years 0 and 10000).
      expect((await get('?date_from=0000-01-01&date_to=9999-12-31')).total).toBe(3);
      for (const q of [
        'channel=fax',
        'status=lost',
        'date_from=yesterday',
        'date_to=2026-13-01',
        'date_to=2026-02-30',
        'per_page=101',
        'page=0',
        'date_from=2026-02-02&date_to=2026-02-01',
      ]) {
        expectError(
          await call(t.app, 'GET', `/api/messages/history?${q}`, { token: owner.token }),
          422,
          'validation_error',
        );
      }
      expect(
        (await call(t.app, 'GET', '/api/messages/history', { token: other.token })).body.data.total,
      ).toBe(1);
    });

    it('a failed message says why; GET /api/messages/{id}; history filters campaign_id and to', async () => {
      const owner = await register(t.app);
      const other = await register(t.app);
      const okTo = uniquePhone();
      const ok = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: okTo, message: 'fine' },
      });
      const bad = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: '+919812350000', message: 'fails' },
      });
      const sent = await call(t.app, 'GET', `/api/messages/${ok.body.data.id}`, { token: owner.token });
      expect(sent.status).toBe(200);
      expect(sent.body.data).toMatchObject({ id: ok.body.data.id, status: 'sent', to: okTo });
      expect(sent.body.data.error_code).toBeNull();
      expect(sent.body.data.error_message).toBeNull();
      expect(sent.body.data.updated_at).toMatch(/Z$/);
      await worker.drain();
      const failed = await call(t.app, 'GET', `/api/messages/${bad.body.data.id}`, { token: owner.token });
      expect(failed.body.data).toMatchObject({ status: 'failed', error_code: 'undeliverable' });
      expect(failed.body.data.error_message).toMatch(/sandbox/);
      const numeric = bad.body.data.id.slice(4);
      expect((await call(t.app, 'GET', `/api/messages/${numeric}`, { token: owner.token })).status).toBe(200);
      // Another workspace's message and an unknown one are 404; a malformed id is 422, saying what an id is.
      for (const id of [bad.body.data.id, 'msg_999999999']) {
        expectError(
          await call(t.app, 'GET', `/api/messages/${id}`, { token: other.token }),
          404,
          'not_found',
        );
      }
      const malformed = await call(t.app, 'GET', '/api/messages/nope', { token: owner.token });
      expectError(malformed, 422, 'validation_error');
      expect(malformed.body.details).toEqual({ id: ['must be an id such as msg_12.'] });
      expectError(await call(t.app, 'GET', `/api/messages/${numeric}`), 401, 'unauthorized');

      // `to` in any form that reads as the same E.164 number.
      const get = async (q: string) =>
        (await call(t.app, 'GET', `/api/messages/history${q}`, { token: owner.token })).body.data;
      const byTo = await get(`?to=${encodeURIComponent(okTo.slice(3))}`);
      expect(byTo.data.map((m: { id: string }) => m.id)).toEqual([ok.body.data.id]);
      expect((await get(`?to=${encodeURIComponent(okTo)}`)).total).toBe(1);
      expect((await get('?to=nobody%40example.com')).total).toBe(0);

      // campaign_id: only that campaign's messages; a cancelled one is not a network refusal.
      const broadcast = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'rally', recipients: [uniquePhone(), uniquePhone()] },
      });
      const campaignId = broadcast.body.data.campaign_id;
      await worker.campaigns.fillNext();
      const cancelled = await call(t.app, 'POST', `/api/campaigns/${campaignId}/cancel`, {
        token: owner.token,
      });
      expect(cancelled.status).toBe(200);
      const ofCampaign = await get(`?campaign_id=${campaignId}`);
      expect(ofCampaign.total).toBe(2);
      for (const m of ofCampaign.data) {
        expect(m).toMatchObject({ campaign_id: campaignId, status: 'failed', error_code: 'cancelled' });
        expect(m.sent_at).toBeNull();
        expect(m.error_message).toMatch(/cancelled/);
      }
      expect((await get(`?campaign_id=${campaignId}&status=sent`)).total).toBe(0);
      expectError(
        await call(t.app, 'GET', '/api/messages/history?campaign_id=twelve', { token: owner.token }),
        422,
        'validation_error',
      );
      expectError(
        await call(t.app, 'GET', '/api/messages/history?campaign=camp_1', { token: owner.token }),
        422,
        'validation_error',
      );
      expect(
        (await call(t.app, 'GET', `/api/messages/history?campaign_id=${campaignId}`, { token: other.token }))
          .body.data.total,
      ).toBe(0);
    });

    it('roles: volunteers neither send nor read messages; managers do', async () => {
      const owner = await register(t.app);
      const manager = await addMember(t.app, owner, 'manager');
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const body = { channel: 'sms', to: uniquePhone(), message: 'x' };
      expect((await call(t.app, 'POST', '/api/messages/send', { token: manager.token, body })).status).toBe(
        201,
      );
      expect((await call(t.app, 'GET', '/api/messages/history', { token: manager.token })).status).toBe(200);
      for (const [method, url] of [
        ['POST', '/api/messages/send'],
        ['POST', '/api/messages/broadcast'],
        ['GET', '/api/messages/history'],
        ['GET', '/api/campaigns'],
        ['POST', '/api/campaigns'],
      ] as const) {
        expectError(
          await call(t.app, method, url, {
            token: volunteer.token,
            body: method === 'POST' ? body : undefined,
          }),
          403,
          'forbidden',
        );
        expectError(
          await call(t.app, method, url, { body: method === 'POST' ? body : undefined }),
          401,
          'unauthorized',
        );
      }
    });
  });
}
