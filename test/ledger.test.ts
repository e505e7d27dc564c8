import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import {
  addMember,
  buildTestApp,
  call,
  dialects,
  expectError,
  register,
  type TestApp,
  uniquePhone,
} from './helpers.ts';
import { isolatedDatabase } from './messaging-helpers.ts';

const run = promisify(execFile);

interface Entry {
  id: number;
  channel: 'sms' | 'whatsapp' | 'email';
  amount: number;
  reason: string;
  message_id: string | null;
  campaign_id: string | null;
  payment_id: number | null;
  created_at: string;
}

for (const dialect of dialects) {
  describe(`credits ledger (${dialect})`, () => {
    let t: TestApp;
    let worker: DeliveryWorker;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    let dir: string;
    let databaseUrl: string;
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'ces-ledger-'));
      database = await isolatedDatabase(dialect);
      databaseUrl = database.env.DATABASE_URL ?? `sqlite:${join(dir, 'ledger.db')}`;
      t = await buildTestApp(dialect, {
        DATABASE_URL: databaseUrl,
        SANDBOX_DELIVERY_DELAY_MS: '0',
        QUIET_HOURS: '',
      });
      worker = new DeliveryWorker({
        db: t.db,
        config: t.config,
        providers: t.providers,
        log: pino({ level: 'silent' }),
      });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
      rmSync(dir, { recursive: true, force: true });
    });

    const ledger = async (token: string, query = '') =>
      call(t.app, 'GET', `/api/credits/ledger?per_page=100${query}`, { token });

    it('adds up to the balance after sends, a broadcast, a cancel, a payment and a CLI grant', async () => {
      const owner = await register(t.app);
      const stranger = await register(t.app);
      const send = (to: string) =>
        call(t.app, 'POST', '/api/messages/send', {
          token: owner.token,
          body: { channel: 'sms', to, message: 'Vote on Sunday' },
        });
      const ok = await send(uniquePhone());
      const bad = await send('+919812370000');
      const broadcast = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: {
          channel: 'sms',
          message: 'rally',
          recipients: [uniquePhone(), uniquePhone(), '+919812380000'],
        },
      });
      expect(broadcast.status).toBe(202);
      await worker.drain();
      const draft = await call(t.app, 'POST', '/api/campaigns', {
        token: owner.token,
        body: {
          name: 'Later',
          channel: 'email',
          message: 'hi',
          recipients: ['a@example.com', 'b@example.com'],
        },
      });
      const campaignId = draft.body.data.id as string;
      expect(
        (await call(t.app, 'POST', `/api/campaigns/${campaignId}/send`, { token: owner.token })).status,
      ).toBe(202);
      expect(
        (await call(t.app, 'POST', `/api/campaigns/${campaignId}/cancel`, { token: owner.token })).status,
      ).toBe(200);
      const payment = await call(t.app, 'POST', '/api/payments', {
        token: owner.token,
        body: { sms_credits: 50, email_credits: 5 },
      });
      expect(payment.status).toBe(201);
      const granted = await run(
        process.execPath,
        ['bin/ces.mjs', 'grant-credits', '--workspace', String(owner.user.workspace_id), '--whatsapp', '7'],
        { env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent' } },
      );
      expect(JSON.parse(granted.stdout).balance.whatsapp_credits).toBe(107);

      const res = await ledger(owner.token);
      expect(res.status).toBe(200);
      const entries = res.body.data.data as Entry[];
      expect(res.body.data.total).toBe(entries.length);
      // Newest first.
      expect(entries.map((e) => e.id)).toEqual([...entries.map((e) => e.id)].sort((a, b) => b - a));
      const credits = (await call(t.app, 'GET', '/api/user', { token: owner.token })).body.data.credits;
      expect(credits).toEqual({ sms_credits: 147, whatsapp_credits: 107, email_credits: 105 });
      for (const channel of ['sms', 'whatsapp', 'email'] as const) {
        const sum = entries.filter((e) => e.channel === channel).reduce((n, e) => n + e.amount, 0);
        expect(sum, channel).toBe(credits[`${channel}_credits`]);
      }
      const sms = entries.filter((e) => e.channel === 'sms');
      const pick = ({ amount, reason, message_id, campaign_id, payment_id }: Entry) => ({
        amount,
        reason,
        message_id,
        campaign_id,
        payment_id,
      });
      const none = { message_id: null, campaign_id: null, payment_id: null };
      // The worker settles the single send's failure and the broadcast's in whichever order it meets them.
      const byKey = (list: ReturnType<typeof pick>[]) => list.map((e) => JSON.stringify(e)).sort();
      expect(byKey(sms.map(pick))).toEqual(
        byKey([
          { amount: 100, reason: 'signup', ...none },
          { amount: -1, reason: 'charge', ...none, message_id: ok.body.data.id },
          { amount: -1, reason: 'charge', ...none, message_id: bad.body.data.id },
          { amount: -3, reason: 'charge', ...none, campaign_id: broadcast.body.data.campaign_id },
          { amount: 1, reason: 'refund', ...none, message_id: bad.body.data.id },
          { amount: 1, reason: 'refund', ...none, campaign_id: broadcast.body.data.campaign_id },
          { amount: 50, reason: 'payment', ...none, payment_id: payment.body.data.payment.id },
        ]),
      );
      expect(pick(sms[0]!)).toMatchObject({ reason: 'payment' });
      expect(pick(sms.at(-1)!)).toMatchObject({ reason: 'signup' });
      expect(entries.filter((e) => e.channel === 'email').map(pick)).toEqual([
        { amount: 5, reason: 'payment', ...none, payment_id: payment.body.data.payment.id },
        { amount: 2, reason: 'refund', ...none, campaign_id: campaignId },
        { amount: -2, reason: 'charge', ...none, campaign_id: campaignId },
        { amount: 100, reason: 'signup', ...none },
      ]);
      expect(entries.filter((e) => e.channel === 'whatsapp').map(pick)).toEqual([
        { amount: 7, reason: 'grant', ...none },
        { amount: 100, reason: 'signup', ...none },
      ]);
      for (const e of entries) expect(e.created_at).toMatch(/Z$/);

      // Filter by channel, page, and nothing of another workspace.
      const whatsapp = await ledger(owner.token, '&channel=whatsapp');
      expect(whatsapp.body.data.total).toBe(2);
      const page = await call(t.app, 'GET', '/api/credits/ledger?per_page=1&page=2', { token: owner.token });
      expect(page.body.data).toMatchObject({ current_page: 2, per_page: 1, total: entries.length });
      expect(page.body.data.data[0].id).toBe(entries[1]!.id);
      const theirs = (await ledger(stranger.token)).body.data;
      expect(theirs.total).toBe(3);
      expect(theirs.data.every((e: Entry) => e.reason === 'signup')).toBe(true);
    });

    it('politicians and managers read it; volunteers and strangers do not; bad queries are 422', async () => {
      const owner = await register(t.app);
      const manager = await addMember(t.app, owner, 'manager');
      const volunteer = await addMember(t.app, owner, 'volunteer');
      expect((await ledger(manager.token)).body.data.total).toBe(3);
      expectError(await ledger(volunteer.token), 403, 'forbidden');
      expectError(await call(t.app, 'GET', '/api/credits/ledger'), 401, 'unauthorized');
      for (const q of ['channel=ivr', 'channel=fax', 'per_page=0', 'page=0', 'chanel=sms']) {
        expectError(
          await call(t.app, 'GET', `/api/credits/ledger?${q}`, { token: owner.token }),
          422,
          'validation_error',
        );
      }
    });
  });
}
