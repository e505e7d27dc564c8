import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import {
  type Account,
  buildTestApp,
  call,
  dialects,
  expectError,
  register,
  type TestApp,
  uniquePhone,
} from './helpers.ts';
import { insertVoters, isolatedDatabase, until } from './messaging-helpers.ts';

const silent = pino({ level: 'silent' });

for (const dialect of dialects) {
  describe(`broadcasts and campaigns (${dialect})`, () => {
    let t: TestApp;
    let worker: DeliveryWorker;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      t = await buildTestApp(dialect, {
        ...database.env,
        SANDBOX_DELIVERY_DELAY_MS: '0',
        BROADCAST_MAX_RECIPIENTS: '5',
        QUIET_HOURS: '',
      });
      worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
    });

    const credits = async (owner: Account) =>
      (await call(t.app, 'GET', '/api/user', { token: owner.token })).body.data.credits;
    const campaign = async (owner: Account, id: string) =>
      (await call(t.app, 'GET', `/api/campaigns/${id}`, { token: owner.token })).body.data;
    const segment = async (owner: Account, filters: object) => {
      const res = await call(t.app, 'POST', '/api/segments', {
        token: owner.token,
        body: { name: 'S', filters },
      });
      if (res.status !== 201) throw new Error(res.raw);
      return res.body.data.id as number;
    };
    const settled = (owner: Account, id: string) =>
      until(async () => {
        await worker.drain();
        return (await campaign(owner, id)).status === 'completed';
      }, `campaign ${id} to complete`);

    it('refuses every invalid field of a broadcast', async () => {
      const owner = await register(t.app);
      const stranger = await register(t.app);
      const foreign = await segment(stranger, { constituency: 'North' });
      const broadcast = (body: unknown) =>
        call(t.app, 'POST', '/api/messages/broadcast', { token: owner.token, body });
      const cases: Array<[unknown, string[]]> = [
        // `message` may be left out for a tpl_ template_id: its absence is reported once the body is valid.
        [{}, ['channel']],
        [{ channel: 'sms', recipients: ['+919812345678'] }, ['message']],
        [{ channel: 'sms', message: 'x' }, ['recipients']],
        [{ channel: 'sms', message: 'x', recipients: [] }, ['recipients']],
        [
          { channel: 'sms', message: 'x', recipients: ['+919812345678', 'bad', '+919812345679'] },
          ['recipients.1'],
        ],
        [
          { channel: 'sms', message: 'x', recipients: ['+919812345678', '+919812345679', 3] },
          ['recipients.2'],
        ],
        [
          { channel: 'sms', message: 'x', recipients: ['+919812345678', '+919812345679', 'x@y.com'] },
          ['recipients.2'],
        ],
        [{ channel: 'email', message: 'x', recipients: ['a@b.com', '+919812345678'] }, ['recipients.1']],
        [
          { channel: 'sms', message: 'x', recipients: Array.from({ length: 6 }, () => uniquePhone()) },
          ['recipients'],
        ],
        [{ channel: 'sms', message: 'x', segment_id: 'abc' }, ['segment_id']],
        [
          { channel: 'sms', message: 'x', recipients: ['+919812345678'], media_url: 'http://a.b/c' },
          ['media_url'],
        ],
        [{ channel: 'sms', message: 'x', recipients: ['+919812345678'], to: '+919812345678' }, ['to']],
        [{ channel: 'post', message: 'x', recipients: ['+919812345678'] }, ['channel']],
      ];
      for (const [body, fields] of cases) {
        const res = await broadcast(body);
        expectError(res, 422, 'validation_error');
        expect(Object.keys(res.body.details).sort(), JSON.stringify(body)).toEqual(fields.sort());
      }
      expectError(await broadcast({ channel: 'sms', message: 'x', segment_id: foreign }), 404, 'not_found');
      expectError(await broadcast({ channel: 'sms', message: 'x', segment_id: 999999999 }), 404, 'not_found');
      expect((await credits(owner)).sms_credits).toBe(100);
    });

    it('counts a segment and recipients once each, reserves at once, and delivers', async () => {
      const owner = await register(t.app);
      const ws = owner.user.workspace_id;
      const shared = uniquePhone();
      const phones = [shared, shared, uniquePhone(), '+919800000000'];
      await insertVoters(t, ws, 4, (i) => ({ phone: phones[i] as string, constituency: 'North' }));
      await insertVoters(t, ws, 1, () => ({ phone: uniquePhone(), constituency: 'South' }));
      const seg = await segment(owner, { constituency: 'north' });
      const extra = uniquePhone();
      const res = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: {
          channel: 'sms',
          message: 'Rally at 5',
          segment_id: seg,
          recipients: [shared, extra, extra.slice(3)],
        },
      });
      expect(res.status).toBe(202);
      // Counted in the request per voter (the shared phone twice) and the explicit recipient already in the
      // segment once: 2 + 4 - 1. Filling the outbox sends the shared phone one message and refunds the other.
      expect(res.body.data).toMatchObject({ total_recipients: 5, status: 'queued' });
      expect(res.body.data.campaign_id).toMatch(/^camp_\d+$/);
      expect((await credits(owner)).sms_credits).toBe(95);
      const queued = await campaign(owner, res.body.data.campaign_id);
      expect(queued).toMatchObject({ status: 'queued', total_recipients: 5, segment_id: seg });
      expect(queued.stats).toEqual({ queued: 5, sent: 0, delivered: 0, failed: 0 });
      await settled(owner, res.body.data.campaign_id);
      const done = await campaign(owner, res.body.data.campaign_id);
      expect(done.total_recipients).toBe(4);
      expect(done.stats).toEqual({ queued: 0, sent: 0, delivered: 3, failed: 1 });
      expect(done.started_at).toMatch(/Z$/);
      expect(done.completed_at).toMatch(/Z$/);
      // The failed recipient (ending 0000) is refunded.
      expect((await credits(owner)).sms_credits).toBe(97);
      const history = await call(t.app, 'GET', '/api/messages/history', { token: owner.token });
      expect(history.body.data.total).toBe(4);
      expect(history.body.data.data[0].campaign_id).toBe(res.body.data.campaign_id);
      expect(new Set(history.body.data.data.map((m: { to: string }) => m.to))).toEqual(
        new Set([shared, phones[2], '+919800000000', extra]),
      );
    });

    it('skips voters without an address for the channel, and refuses what the credits do not cover', async () => {
      const owner = await register(t.app);
      const ws = owner.user.workspace_id;
      await insertVoters(t, ws, 6, (i) => ({
        phone: uniquePhone(),
        email: i % 2 ? `v${i}.${ws}@example.com` : null,
      }));
      const seg = await segment(owner, {});
      const res = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'email', message: 'Hello', subject: 'News', segment_id: seg },
      });
      expect(res.body.data.total_recipients).toBe(3);
      await t.db.kysely
        .updateTable('credit_balances')
        .set({ balance: 2 })
        .where('workspace_id', '=', ws)
        .execute();
      const short = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'whatsapp', message: 'Hello', segment_id: seg },
      });
      expectError(short, 402, 'insufficient_credits');
      expect(short.body.details).toEqual({ channel: 'whatsapp', required: 6, available: 2 });
      const list = await call(t.app, 'GET', '/api/campaigns', { token: owner.token });
      expect(list.body.data.total).toBe(1);
    });

    it('Idempotency-Key on broadcast: one campaign, credits reserved once', async () => {
      const owner = await register(t.app);
      const body = { channel: 'sms', message: 'Once', recipients: [uniquePhone(), uniquePhone()] };
      const headers = { 'idempotency-key': 'broadcast-1' };
      const first = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body,
        headers,
      });
      const again = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body,
        headers,
      });
      expect(first.status).toBe(202);
      expect(again.status).toBe(202);
      expect(again.body).toEqual(first.body);
      expect((await credits(owner)).sms_credits).toBe(98);
      expect((await call(t.app, 'GET', '/api/campaigns', { token: owner.token })).body.data.total).toBe(1);
      expectError(
        await call(t.app, 'POST', '/api/messages/broadcast', {
          token: owner.token,
          body: { ...body, message: 'Twice' },
          headers,
        }),
        422,
        'validation_error',
      );
    });

    it('campaigns: draft, send, stats, conflicts, and another workspace sees none of it', async () => {
      const owner = await register(t.app);
      const stranger = await register(t.app);
      const created = await call(t.app, 'POST', '/api/campaigns', {
        token: owner.token,
        body: {
          name: 'Door to door',
          channel: 'whatsapp',
          message: 'Meet us',
          recipients: [uniquePhone(), uniquePhone()],
        },
      });
      expect(created.status).toBe(201);
      const id = created.body.data.id;
      expect(created.body.data).toMatchObject({
        name: 'Door to door',
        channel: 'whatsapp',
        message: 'Meet us',
        status: 'draft',
        segment_id: null,
        total_recipients: 0,
        stats: { queued: 0, sent: 0, delivered: 0, failed: 0 },
        scheduled_at: null,
        started_at: null,
        completed_at: null,
      });
      expect((await credits(owner)).whatsapp_credits).toBe(100);
      expect(
        (await call(t.app, 'GET', `/api/campaigns/${id.slice(5)}`, { token: owner.token })).body.data.id,
      ).toBe(id);
      expectError(
        await call(t.app, 'GET', `/api/campaigns/${id}`, { token: stranger.token }),
        404,
        'not_found',
      );
      expectError(
        await call(t.app, 'POST', `/api/campaigns/${id}/send`, { token: stranger.token }),
        404,
        'not_found',
      );
      expectError(
        await call(t.app, 'GET', '/api/campaigns/camp_x', { token: owner.token }),
        422,
        'validation_error',
      );
      expect((await call(t.app, 'GET', '/api/campaigns', { token: stranger.token })).body.data.total).toBe(0);
      const sent = await call(t.app, 'POST', `/api/campaigns/${id}/send`, { token: owner.token });
      expect(sent.status).toBe(202);
      expect(sent.body.data).toMatchObject({ status: 'queued', total_recipients: 2 });
      expect((await credits(owner)).whatsapp_credits).toBe(98);
      expectError(
        await call(t.app, 'POST', `/api/campaigns/${id}/send`, { token: owner.token }),
        409,
        'conflict',
      );
      await settled(owner, id);
      expect((await campaign(owner, id)).stats).toEqual({ queued: 0, sent: 0, delivered: 2, failed: 0 });
      expectError(
        await call(t.app, 'POST', `/api/campaigns/${id}/cancel`, { token: owner.token }),
        409,
        'conflict',
      );
      const list = await call(t.app, 'GET', '/api/campaigns', { token: owner.token });
      expect(list.body.data).toMatchObject({ total: 1, current_page: 1, per_page: 15, last_page: 1 });
      expect(list.body.data.data[0].stats.delivered).toBe(2);
    });

    it('refuses invalid campaigns', async () => {
      const owner = await register(t.app);
      const create = (body: unknown) => call(t.app, 'POST', '/api/campaigns', { token: owner.token, body });
      const base = { name: 'C', channel: 'sms', message: 'x', recipients: ['+919812345678'] };
      const cases: Array<[unknown, string[]]> = [
        [{ ...base, name: undefined }, ['name']],
        [{ ...base, name: '  ' }, ['name']],
        [{ ...base, recipients: undefined }, ['recipients']],
        [{ ...base, scheduled_at: '2020-01-01T00:00:00Z' }, ['scheduled_at']],
        [{ ...base, scheduled_at: 'tomorrow' }, ['scheduled_at']],
        [{ ...base, status: 'sending' }, ['status']],
      ];
      for (const [body, fields] of cases) {
        const res = await create(body);
        expectError(res, 422, 'validation_error');
        expect(Object.keys(res.body.details).sort(), JSON.stringify(body)).toEqual(fields.sort());
      }
    });

    it('a scheduled campaign starts by itself once its time has come', async () => {
      const owner = await register(t.app);
      const at = new Date(Date.now() + 1500).toISOString();
      const created = await call(t.app, 'POST', '/api/campaigns', {
        token: owner.token,
        body: {
          name: 'Later',
          channel: 'sms',
          message: 'Polls open',
          recipients: [uniquePhone()],
          scheduled_at: at,
        },
      });
      expect(created.body.data).toMatchObject({ status: 'scheduled', scheduled_at: at });
      await worker.drain();
      expect((await campaign(owner, created.body.data.id)).status).toBe('scheduled');
      await settled(owner, created.body.data.id);
      const done = await campaign(owner, created.body.data.id);
      expect(done.stats.delivered).toBe(1);
      expect(done.started_at >= at).toBe(true);
    });

    it('cancel: a draft, a queued broadcast (full refund), a sending one (what has not gone out)', async () => {
      const owner = await register(t.app);
      const draft = await call(t.app, 'POST', '/api/campaigns', {
        token: owner.token,
        body: { name: 'D', channel: 'sms', message: 'x', recipients: [uniquePhone()] },
      });
      const cancelled = await call(t.app, 'POST', `/api/campaigns/${draft.body.data.id}/cancel`, {
        token: owner.token,
      });
      expect(cancelled.status).toBe(200);
      expect(cancelled.body.data.status).toBe('cancelled');
      expectError(
        await call(t.app, 'POST', `/api/campaigns/${draft.body.data.id}/send`, { token: owner.token }),
        409,
        'conflict',
      );

      const recipients = Array.from({ length: 5 }, () => uniquePhone());
      const queued = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'x', recipients },
      });
      expect((await credits(owner)).sms_credits).toBe(95);
      await call(t.app, 'POST', `/api/campaigns/${queued.body.data.campaign_id}/cancel`, {
        token: owner.token,
      });
      expect((await credits(owner)).sms_credits).toBe(100);
      await worker.drain();
      expect((await campaign(owner, queued.body.data.campaign_id)).stats).toEqual({
        queued: 0,
        sent: 0,
        delivered: 0,
        failed: 0,
      });

      const sending = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'y', recipients },
      });
      const id = sending.body.data.campaign_id;
      while (await worker.campaigns.fillNext()) {
        // fill the outbox, send nothing
      }
      expect((await campaign(owner, id)).status).toBe('sending');
      const stopped = await call(t.app, 'POST', `/api/campaigns/${id}/cancel`, { token: owner.token });
      expect(stopped.body.data).toMatchObject({ status: 'cancelled', stats: { queued: 0, failed: 5 } });
      expect((await credits(owner)).sms_credits).toBe(100);
      await worker.drain();
      expect(t.providers.sms.sent.some((m) => recipients.includes(m.to))).toBe(false);
    });

    it('PATCH and DELETE change draft and scheduled campaigns only; items echo subject, template, media', async () => {
      const owner = await register(t.app);
      const stranger = await register(t.app);
      const created = await call(t.app, 'POST', '/api/campaigns', {
        token: owner.token,
        body: {
          name: 'Poster',
          channel: 'whatsapp',
          message: 'See the poster',
          recipients: [uniquePhone()],
          template_id: 'poster_v1',
          media_url: 'https://example.org/poster.png',
        },
      });
      const id = created.body.data.id as string;
      expect(created.body.data).toMatchObject({
        template_id: 'poster_v1',
        media_url: 'https://example.org/poster.png',
        subject: null,
      });
      const at = new Date(Date.now() + 3_600_000).toISOString();
      const two = [uniquePhone(), uniquePhone()];
      const patched = await call(t.app, 'PATCH', `/api/campaigns/${id}`, {
        token: owner.token,
        body: { name: 'Poster 2', message: 'New text', recipients: two, scheduled_at: at, media_url: null },
      });
      expect(patched.status).toBe(200);
      expect(patched.body.data).toMatchObject({
        id,
        name: 'Poster 2',
        message: 'New text',
        status: 'scheduled',
        scheduled_at: at,
        template_id: 'poster_v1',
        media_url: null,
      });
      const unscheduled = await call(t.app, 'PATCH', `/api/campaigns/${id}`, {
        token: owner.token,
        body: { scheduled_at: null },
      });
      expect(unscheduled.body.data).toMatchObject({ status: 'draft', scheduled_at: null, name: 'Poster 2' });
      // Bad edits: all fields named at once; the campaign is unchanged.
      const bad = await call(t.app, 'PATCH', `/api/campaigns/${id}`, {
        token: owner.token,
        body: {
          name: ' ',
          recipients: ['nope'],
          scheduled_at: '2020-01-01T00:00:00Z',
          media_url: 'http://x.org',
        },
      });
      expectError(bad, 422, 'validation_error');
      expect(Object.keys(bad.body.details).sort()).toEqual([
        'media_url',
        'name',
        'recipients.0',
        'scheduled_at',
      ]);
      for (const body of [{}, { channel: 'sms' }, { recipients: null }]) {
        expectError(
          await call(t.app, 'PATCH', `/api/campaigns/${id}`, { token: owner.token, body }),
          422,
          'validation_error',
        );
      }
      expect((await campaign(owner, id)).name).toBe('Poster 2');
      expectError(
        await call(t.app, 'PATCH', `/api/campaigns/${id}`, { token: stranger.token, body: { name: 'x' } }),
        404,
        'not_found',
      );
      expectError(
        await call(t.app, 'DELETE', `/api/campaigns/${id}`, { token: stranger.token }),
        404,
        'not_found',
      );
      // Once sent: 409 for both, and the send used the edited recipients.
      const sent = await call(t.app, 'POST', `/api/campaigns/${id}/send`, { token: owner.token });
      expect(sent.body.data).toMatchObject({ status: 'queued', total_recipients: 2 });
      expectError(
        await call(t.app, 'PATCH', `/api/campaigns/${id}`, { token: owner.token, body: { name: 'late' } }),
        409,
        'conflict',
      );
      expectError(
        await call(t.app, 'DELETE', `/api/campaigns/${id}`, { token: owner.token }),
        409,
        'conflict',
      );
      await settled(owner, id);
      expect(t.providers.whatsapp.sent.filter((m) => two.includes(m.to)).map((m) => m.body)).toEqual([
        'New text',
        'New text',
      ]);
      // A draft deletes, and is gone.
      const draft = await call(t.app, 'POST', '/api/campaigns', {
        token: owner.token,
        body: { name: 'Gone', channel: 'sms', message: 'x', recipients: [uniquePhone()] },
      });
      const deleted = await call(t.app, 'DELETE', `/api/campaigns/${draft.body.data.id}`, {
        token: owner.token,
      });
      expect(deleted.status).toBe(200);
      expectError(
        await call(t.app, 'GET', `/api/campaigns/${draft.body.data.id}`, { token: owner.token }),
        404,
        'not_found',
      );
    });

    it('GET /campaigns/{id}/messages pages its messages; retry-failed resends only provider failures', async () => {
      const owner = await register(t.app);
      const stranger = await register(t.app);
      const good = [uniquePhone(), uniquePhone()];
      const failing = ['+919812390000', '+919812400000'];
      const broadcast = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Vote', recipients: [...good, ...failing] },
      });
      const id = broadcast.body.data.campaign_id as string;
      expectError(
        await call(t.app, 'POST', `/api/campaigns/${id}/retry-failed`, { token: owner.token }),
        409,
        'conflict',
      );
      await settled(owner, id);
      const messages = await call(t.app, 'GET', `/api/campaigns/${id}/messages?per_page=10`, {
        token: owner.token,
      });
      expect(messages.status).toBe(200);
      expect(messages.body.data.total).toBe(4);
      const failed = await call(t.app, 'GET', `/api/campaigns/${id}/messages?status=failed`, {
        token: owner.token,
      });
      expect(failed.body.data.data.map((m: { to: string }) => m.to).sort()).toEqual([...failing].sort());
      for (const m of failed.body.data.data)
        expect(m).toMatchObject({ campaign_id: id, error_code: 'undeliverable' });
      expectError(
        await call(t.app, 'GET', `/api/campaigns/${id}/messages?status=lost`, { token: owner.token }),
        422,
        'validation_error',
      );
      expectError(
        await call(t.app, 'GET', `/api/campaigns/${id}/messages`, { token: stranger.token }),
        404,
        'not_found',
      );
      expectError(
        await call(t.app, 'POST', `/api/campaigns/${id}/retry-failed`, { token: stranger.token }),
        404,
        'not_found',
      );

      const before = (await credits(owner)).sms_credits;
      const retry = await call(t.app, 'POST', `/api/campaigns/${id}/retry-failed`, { token: owner.token });
      expect(retry.status).toBe(202);
      expect(retry.body.data).toMatchObject({
        status: 'queued',
        total_recipients: 2,
        channel: 'sms',
        message: 'Vote',
      });
      expect(retry.body.data.id).not.toBe(id);
      expect(retry.body.data.name).toContain(id);
      expect((await credits(owner)).sms_credits).toBe(before - 2);
      await settled(owner, retry.body.data.id);
      const resent = await call(t.app, 'GET', `/api/campaigns/${retry.body.data.id}/messages`, {
        token: owner.token,
      });
      expect(resent.body.data.data.map((m: { to: string }) => m.to).sort()).toEqual([...failing].sort());

      // A campaign whose failures are only cancellations has nothing to retry; 402 when credits are short.
      const cancelled = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'x', recipients: [uniquePhone()] },
      });
      await worker.campaigns.fillNext();
      await call(t.app, 'POST', `/api/campaigns/${cancelled.body.data.campaign_id}/cancel`, {
        token: owner.token,
      });
      expectError(
        await call(t.app, 'POST', `/api/campaigns/${cancelled.body.data.campaign_id}/retry-failed`, {
          token: owner.token,
        }),
        409,
        'conflict',
      );
      await t.db.kysely
        .updateTable('credit_balances')
        .set({ balance: 1 })
        .where('workspace_id', '=', owner.user.workspace_id)
        .where('channel', '=', 'sms')
        .execute();
      const short = await call(t.app, 'POST', `/api/campaigns/${retry.body.data.id}/retry-failed`, {
        token: owner.token,
      });
      expectError(short, 402, 'insufficient_credits');
      expect(
        (await call(t.app, 'GET', '/api/campaigns?per_page=100', { token: owner.token })).body.data.total,
      ).toBe(3);
    });

    it('retry-failed runs once: parallel calls make one retry, a later one is 409 naming it, Idempotency-Key replays, audited', async () => {
      const owner = await register(t.app);
      const failing = [`+91981${String(Date.now()).slice(-3)}0000`];
      const broadcast = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Vote', recipients: [uniquePhone(), ...failing] },
      });
      const id = broadcast.body.data.campaign_id as string;
      await settled(owner, id);
      const before = (await credits(owner)).sms_credits;
      const key = { 'idempotency-key': `retry-${id}` };
      const answers = await Promise.all([
        call(t.app, 'POST', `/api/campaigns/${id}/retry-failed`, { token: owner.token }),
        call(t.app, 'POST', `/api/campaigns/${id}/retry-failed`, { token: owner.token }),
        call(t.app, 'POST', `/api/campaigns/${id}/retry-failed`, { token: owner.token, headers: key }),
      ]);
      const accepted = answers.filter((a) => a.status === 202);
      expect(accepted).toHaveLength(1);
      for (const a of answers.filter((x) => x.status !== 202)) expectError(a, 409, 'conflict');
      const retryId = accepted[0]!.body.data.id as string;
      const later = await call(t.app, 'POST', `/api/campaigns/${id}/retry-failed`, { token: owner.token });
      expectError(later, 409, 'conflict');
      expect(later.body.details.retry_campaign_id).toBe(retryId);
      expect(later.body.message).toContain(retryId);
      expect((await credits(owner)).sms_credits).toBe(before - 1);
      const audit = await call(t.app, 'GET', '/api/audit-log?action=campaign.retried', {
        token: owner.token,
      });
      expect(audit.status).toBe(200);
      expect(audit.body.data.data).toHaveLength(1);
      expect(audit.body.data.data[0]).toMatchObject({
        action: 'campaign.retried',
        target_id: id,
        details: { retry_campaign_id: retryId, recipients: 1 },
      });

      // With an Idempotency-Key, a repeat gets the first answer (a 202 or the 409) and does nothing again.
      const other = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Vote', recipients: failing },
      });
      const otherId = other.body.data.campaign_id as string;
      await settled(owner, otherId);
      const headers = { 'idempotency-key': `retry-${otherId}` };
      const first = await call(t.app, 'POST', `/api/campaigns/${otherId}/retry-failed`, {
        token: owner.token,
        headers,
      });
      const again = await call(t.app, 'POST', `/api/campaigns/${otherId}/retry-failed`, {
        token: owner.token,
        headers,
      });
      expect(first.status).toBe(202);
      expect(again.status).toBe(202);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body.data.id).toBe(first.body.data.id);
    });
  });
}
