/**
 * The preview is the send (contract, fifth part): it evaluates at the campaign's scheduled_at (or a "Send at"
 * given as `at`), counts the credits sending would reserve beside the workspace's, and shows the voters skipped
 * for want of an address; the failures keep what the office's own rules stopped apart, as `stopped`.
 */
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { buildTestApp, call, dialects, expectError, register, type TestApp, uniquePhone } from './helpers.ts';
import { isolatedDatabase } from './messaging-helpers.ts';

for (const dialect of dialects) {
  describe(`the preview is the send (${dialect})`, () => {
    let t: TestApp;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      // Quiet hours 21:00-10:00 in India: a campaign at 11:00 IST is not held, one at 09:00 is.
      t = await buildTestApp(dialect, {
        ...database.env,
        QUIET_HOURS: '21:00-10:00',
        QUIET_HOURS_TZ: 'Asia/Kolkata',
      });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
    });

    it('evaluates at the time it would go, counts what Send reserves, and names the voters without an address', async () => {
      const owner = await register(t.app);
      const api = (method: string, url: string, body?: unknown) =>
        call(t.app, method as 'GET', url, { token: owner.token, ...(body !== undefined ? { body } : {}) });
      const ws = owner.user.workspace_id;
      for (let i = 0; i < 4; i++)
        await api('POST', '/api/voters', { name: `Voter ${i}`, phone: uniquePhone(), ward: 'Ward 3' });
      // A voter from the roll without a phone: skipped for want of an address.
      await t.db.kysely
        .insertInto('voters')
        .values({
          workspace_id: ws,
          name: 'No Phone',
          name_key: 'no phone',
          phone: null,
          email: null,
          constituency: null,
          constituency_key: null,
          booth: null,
          booth_key: null,
          ward: 'Ward 3',
          ward_key: 'ward 3',
          address: null,
          epic_number: 'ABC0000099',
          created_at: new Date().toISOString(),
          updated_at: new Date().toISOString(),
        })
        .execute();
      const segment = (await api('POST', '/api/segments', { name: 'Ward 3', filters: { ward: 'Ward 3' } }))
        .body.data;
      const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
      const at11 = `${tomorrow}T05:30:00.000Z`; // 11:00 IST
      const at09 = `${tomorrow}T03:30:00.000Z`; // 09:00 IST
      const campaign = (
        await api('POST', '/api/campaigns', {
          name: 'Water',
          channel: 'sms',
          message: 'Tankers at 9',
          segment_id: segment.id,
          scheduled_at: at11,
        })
      ).body.data;
      const preview = async (query = '') =>
        (await api('POST', `/api/campaigns/${campaign.id}/preview${query}`)).body.data;
      const scheduled = await preview();
      expect(scheduled).toMatchObject({
        evaluated_at: at11,
        total_recipients: 4,
        skipped_no_address: 1,
        to_send: 4,
        held: 0,
        held_until: null,
        credits_to_reserve: 4,
      });
      // A "Send at" being typed (09:00 IST): held until 10:00 IST that day.
      const early = await preview(`?at=${encodeURIComponent(at09)}`);
      expect(early).toMatchObject({ evaluated_at: at09, held: 4, held_until: `${tomorrow}T04:30:00.000Z` });
      expectError(
        await api('POST', `/api/campaigns/${campaign.id}/preview?at=tomorrow`),
        422,
        'validation_error',
      );

      // Credits: the preview says Send would reserve more than the workspace has, and Send is then 402.
      await t.db.kysely
        .updateTable('credit_balances')
        .set({ balance: 3 })
        .where('workspace_id', '=', ws)
        .where('channel', '=', 'sms')
        .execute();
      const short = await preview();
      expect(short).toMatchObject({ credits_to_reserve: 4, credits_available: 3 });
      expectError(await api('POST', `/api/campaigns/${campaign.id}/send`), 402, 'insufficient_credits');
    });

    it("keeps what the office's own rules stopped apart from what failed", async () => {
      const owner = await register(t.app);
      const api = (method: string, url: string, body?: unknown) =>
        call(t.app, method as 'GET', url, { token: owner.token, ...(body !== undefined ? { body } : {}) });
      const stopped = uniquePhone();
      await api('POST', '/api/opt-outs', { address: stopped, channel: 'sms', reason: 'asked' });
      const broadcast = await api('POST', '/api/messages/broadcast', {
        channel: 'sms',
        message: 'Rally at 5',
        recipients: [stopped, uniquePhone()],
      });
      expect(broadcast.status, broadcast.raw).toBe(202);
      const worker = new DeliveryWorker({
        db: t.db,
        config: { ...t.config, quietHours: undefined },
        providers: t.providers,
        log: pino({ level: 'silent' }),
      });
      await worker.drain();
      // And one a provider failed (as a delivery report would leave it).
      const now = new Date().toISOString();
      await t.db.kysely
        .insertInto('messages')
        .values({
          workspace_id: owner.user.workspace_id,
          campaign_id: null,
          channel: 'sms',
          to: uniquePhone(),
          body: 'x',
          subject: null,
          media_url: null,
          template_id: null,
          status: 'failed',
          cost: 1,
          provider: 'sandbox',
          provider_message_id: null,
          claimed_by: null,
          lease_until: null,
          attempts: 1,
          next_attempt_at: now,
          error: 'The handset was off.',
          error_code: 'undeliverable',
          created_at: now,
          updated_at: now,
          sent_at: now,
          delivered_at: null,
          failed_at: now,
        })
        .execute();
      const failures = (await api('GET', '/api/messages/failures')).body.data as Array<{
        error_code: string;
        kind: string;
      }>;
      expect(failures).toEqual(
        expect.arrayContaining([
          { error_code: 'opted_out', count: 1, kind: 'stopped' },
          { error_code: 'undeliverable', count: 1, kind: 'failed' },
        ]),
      );
      for (const f of failures) expect(f.kind).toBe(f.error_code === 'opted_out' ? 'stopped' : 'failed');
    });
  });
}
