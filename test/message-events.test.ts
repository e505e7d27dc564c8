import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { buildTestApp, call, dialects, register, type TestApp, uniquePhone } from './helpers.ts';
import { isolatedDatabase } from './messaging-helpers.ts';
import { startReceiver, workerFor } from './webhook-receivers.ts';

const silent = pino({ level: 'silent' });

for (const dialect of dialects) {
  describe(`message.delivered and message.failed webhooks (${dialect})`, () => {
    let t: TestApp;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      t = await buildTestApp(dialect, {
        ...database.env,
        SANDBOX_DELIVERY_DELAY_MS: '0',
        WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
        WEBHOOK_RETRY_SCHEDULE: '0',
      });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
    });

    it('are signed, carry the message as history shows it, and come once per message', async () => {
      const receiver = await startReceiver();
      try {
        const owner = await register(t.app);
        const hook = await call(t.app, 'POST', '/api/webhooks', {
          token: owner.token,
          body: { url: receiver.url, events: ['message.delivered', 'message.failed'] },
        });
        expect(hook.status).toBe(201);
        const good = uniquePhone();
        const bad = `${uniquePhone().slice(0, -4)}0000`;
        const sent = await call(t.app, 'POST', '/api/messages/broadcast', {
          token: owner.token,
          body: { channel: 'sms', recipients: [good, bad], message: 'Polling booth opens at 7' },
        });
        expect(sent.status).toBe(202);
        const delivery = new DeliveryWorker({
          db: t.db,
          config: t.config,
          providers: t.providers,
          log: silent,
        });
        await delivery.drain();
        await workerFor(t, [owner.user.workspace_id], { allowPrivateUrls: true }).drain();
        const verifier = new Webhook(hook.body.data.secret);
        const events = receiver.received.map((r) => {
          verifier.verify(r.body, r.headers as Record<string, string>);
          return r.json;
        });
        const byType = Object.fromEntries(events.map((e) => [e.type, e.data]));
        expect(events).toHaveLength(2);
        expect(byType['message.delivered']).toMatchObject({
          channel: 'sms',
          to: good,
          message: 'Polling booth opens at 7',
          status: 'delivered',
          campaign_id: sent.body.data.campaign_id,
        });
        expect(byType['message.failed']).toMatchObject({
          to: bad,
          status: 'failed',
          campaign_id: sent.body.data.campaign_id,
        });
        // The ledger: both credits reserved, the delivered one captured, the failed one refunded.
        const ledger = await t.db.kysely
          .selectFrom('credit_ledger')
          .select(['kind', 'amount'])
          .where('workspace_id', '=', owner.user.workspace_id)
          .where('channel', '=', 'sms')
          .where('kind', 'in', ['reserve', 'capture', 'refund'])
          .orderBy('id')
          .execute();
        expect(ledger.map((e) => `${e.kind} ${Number(e.amount)}`).sort()).toEqual([
          'capture 1',
          'refund 1',
          'reserve -2',
        ]);
        const me = await call(t.app, 'GET', '/api/user', { token: owner.token });
        expect(me.body.data.credits.sms_credits).toBe(99);
        // Settling again (a late or repeated report) emits nothing more.
        await delivery.drain();
        await workerFor(t, [owner.user.workspace_id], { allowPrivateUrls: true }).drain();
        expect(receiver.received).toHaveLength(2);
      } finally {
        await receiver.close();
      }
    });

    it('cancelling a sending campaign emits message.failed for what had not gone out', async () => {
      const receiver = await startReceiver();
      try {
        const owner = await register(t.app);
        await call(t.app, 'POST', '/api/webhooks', {
          token: owner.token,
          body: { url: receiver.url, events: ['message.failed'] },
        });
        const sent = await call(t.app, 'POST', '/api/messages/broadcast', {
          token: owner.token,
          body: { channel: 'sms', recipients: [uniquePhone(), uniquePhone()], message: 'Stop this' },
        });
        const delivery = new DeliveryWorker({
          db: t.db,
          config: t.config,
          providers: t.providers,
          log: silent,
        });
        while (await delivery.campaigns.fillNext()) {
          // fill the outbox, send nothing
        }
        const cancelled = await call(t.app, 'POST', `/api/campaigns/${sent.body.data.campaign_id}/cancel`, {
          token: owner.token,
        });
        expect(cancelled.body.data.stats).toMatchObject({ queued: 0, failed: 2 });
        await workerFor(t, [owner.user.workspace_id], { allowPrivateUrls: true }).drain();
        expect(receiver.received.map((r) => r.json.type)).toEqual(['message.failed', 'message.failed']);
        expect(receiver.received.every((r) => r.json.data.status === 'failed')).toBe(true);
      } finally {
        await receiver.close();
      }
    });
  });
}
