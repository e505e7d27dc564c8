import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { buildTestApp, call, dialects, register, type TestApp, uniquePhone } from './helpers.ts';
import { isolatedDatabase } from './messaging-helpers.ts';

const silent = pino({ level: 'silent' });
/** HH:MM in UTC, `minutes` from now. */
const hourMinute = (minutes: number) => new Date(Date.now() + minutes * 60_000).toISOString().slice(11, 16);

/** A campaign held by quiet hours or a silence period says so: held_until and held_reason on its item. */
for (const dialect of dialects) {
  describe(`campaigns say when they are held (${dialect})`, () => {
    let t: TestApp;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    // Quiet hours from an hour ago to three hours from now (UTC).
    const windowEnd = hourMinute(180);
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      t = await buildTestApp(dialect, {
        ...database.env,
        QUIET_HOURS: `${hourMinute(-60)}-${windowEnd}`,
        QUIET_HOURS_TZ: 'UTC',
      });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
    });

    it('quiet hours: held_reason quiet_hours and held_until the end of the window; email and drafts are not held', async () => {
      const owner = await register(t.app);
      const sms = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Rally', recipients: [uniquePhone()] },
      });
      const email = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'email', subject: 'Rally', message: 'Rally', recipients: ['held.test@example.com'] },
      });
      const worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
      await worker.drain();
      const held = await call(t.app, 'GET', `/api/campaigns/${sms.body.data.campaign_id}`, {
        token: owner.token,
      });
      expect(held.body.data.status).toBe('sending');
      expect(held.body.data.held_reason).toBe('quiet_hours');
      const until = Date.parse(held.body.data.held_until);
      expect(new Date(until).toISOString().slice(11, 16)).toBe(windowEnd);
      expect(until).toBeGreaterThan(Date.now());
      const sent = await call(t.app, 'GET', `/api/campaigns/${email.body.data.campaign_id}`, {
        token: owner.token,
      });
      expect(sent.body.data).toMatchObject({ status: 'completed', held_until: null, held_reason: null });
      const list = await call(t.app, 'GET', '/api/campaigns', { token: owner.token });
      const item = list.body.data.data.find((c: { id: string }) => c.id === sms.body.data.campaign_id);
      expect(item).toMatchObject({ held_reason: 'quiet_hours', held_until: held.body.data.held_until });
      const draft = await call(t.app, 'POST', '/api/campaigns', {
        token: owner.token,
        body: { name: 'Later', channel: 'sms', message: 'x', recipients: [uniquePhone()] },
      });
      expect(draft.body.data).toMatchObject({ status: 'draft', held_until: null, held_reason: null });
    });
  });

  describe(`campaigns in a silence period (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
    });
    afterAll(() => t.close());

    it('a queued sms campaign while a silence period is in force: silence_period until it ends', async () => {
      const owner = await register(t.app);
      const ends = new Date(Date.now() + 7_200_000).toISOString();
      const period = await call(t.app, 'POST', '/api/silence-periods', {
        token: owner.token,
        body: {
          constituency: 'Varanasi',
          starts_at: new Date(Date.now() - 60_000).toISOString(),
          ends_at: ends,
        },
      });
      expect(period.status).toBe(201);
      const sms = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Rally', recipients: [uniquePhone()] },
      });
      const res = await call(t.app, 'GET', `/api/campaigns/${sms.body.data.campaign_id}`, {
        token: owner.token,
      });
      expect(res.body.data).toMatchObject({ status: 'queued', held_reason: 'silence_period' });
      expect(Date.parse(res.body.data.held_until)).toBe(Date.parse(ends));
    });
  });
}
