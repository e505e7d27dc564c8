import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
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
import { insertVoters, isolatedDatabase, until } from './messaging-helpers.ts';

const silent = pino({ level: 'silent' });
const hour = 3_600_000;
const at = (offsetMs: number) => new Date(Date.now() + offsetMs).toISOString();

for (const dialect of dialects) {
  describe(`silence periods (${dialect})`, () => {
    let t: TestApp;
    let worker: DeliveryWorker;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      t = await buildTestApp(dialect, { ...database.env, SANDBOX_DELIVERY_DELAY_MS: '0' });
      worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
    });

    const create = (owner: Account, body: unknown) =>
      call(t.app, 'POST', '/api/silence-periods', { token: owner.token, body });
    const credits = async (owner: Account) =>
      (await call(t.app, 'GET', '/api/user', { token: owner.token })).body.data.credits;

    it('creates, lists and deletes; ends_at after starts_at; audited', async () => {
      const owner = await register(t.app);
      const res = await create(owner, {
        constituency: ' Varanasi ',
        starts_at: '2026-12-01T18:00:00+05:30',
        ends_at: '2026-12-03T18:00:00+05:30',
        reason: 'Poll on 3 December',
      });
      expect(res.status).toBe(201);
      expect(res.body.data).toMatchObject({
        constituency: 'Varanasi',
        starts_at: '2026-12-01T12:30:00.000Z',
        ends_at: '2026-12-03T12:30:00.000Z',
        reason: 'Poll on 3 December',
      });
      await create(owner, { constituency: 'Amethi', starts_at: at(hour), ends_at: at(2 * hour) });
      const list = await call(t.app, 'GET', '/api/silence-periods', { token: owner.token });
      expect(list.body.data.total).toBe(2);
      const filtered = await call(t.app, 'GET', '/api/silence-periods?constituency=VARANASI', {
        token: owner.token,
      });
      expect(filtered.body.data.data.map((p: { id: number }) => p.id)).toEqual([res.body.data.id]);
      const stranger = await register(t.app);
      expectError(
        await call(t.app, 'DELETE', `/api/silence-periods/${res.body.data.id}`, { token: stranger.token }),
        404,
        'not_found',
      );
      const del = await call(t.app, 'DELETE', `/api/silence-periods/${res.body.data.id}`, {
        token: owner.token,
      });
      expect(del.status).toBe(200);
      const audit = await t.db.kysely
        .selectFrom('audit_log')
        .select('action')
        .where('workspace_id', '=', owner.user.workspace_id)
        .orderBy('id')
        .execute();
      expect(audit.map((a) => a.action).filter((a) => a.startsWith('silence_period.'))).toEqual([
        'silence_period.created',
        'silence_period.created',
        'silence_period.deleted',
      ]);
    });

    it('refuses bad input and other roles', async () => {
      const owner = await register(t.app);
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const cases: Array<[unknown, string]> = [
        [{ constituency: '  ', starts_at: at(0), ends_at: at(hour) }, 'constituency'],
        [{ constituency: 'X', starts_at: 'tomorrow', ends_at: at(hour) }, 'starts_at'],
        [{ constituency: 'X', starts_at: '2026-12-01T10:00:00', ends_at: at(hour) }, 'starts_at'],
        [{ constituency: 'X', starts_at: at(hour), ends_at: at(hour) }, 'ends_at'],
        [{ constituency: 'X', starts_at: at(2 * hour), ends_at: at(hour) }, 'ends_at'],
        [{ constituency: 'X', starts_at: at(0) }, 'ends_at'],
        // Not a day of the calendar: refused, not rolled over to 2 March.
        [
          { constituency: 'X', starts_at: '2026-01-01T00:00:00Z', ends_at: '2026-02-30T00:00:00Z' },
          'ends_at',
        ],
        [{ constituency: 'X', starts_at: '2026-04-31T00:00:00+05:30', ends_at: at(hour) }, 'starts_at'],
      ];
      for (const [body, field] of cases) {
        const res = await create(owner, body);
        expectError(res, 422, 'validation_error');
        expect(Object.keys(res.body.details)).toContain(field);
      }
      expectError(await call(t.app, 'GET', '/api/silence-periods'), 401, 'unauthorized');
      expectError(
        await call(t.app, 'GET', '/api/silence-periods', { token: volunteer.token }),
        403,
        'forbidden',
      );
    });

    it('fails bulk sms/whatsapp/ivr to voters of a constituency in force with silence_period, refunded', async () => {
      const owner = await register(t.app);
      const ws = owner.user.workspace_id;
      const phones = [uniquePhone(), uniquePhone(), uniquePhone(), uniquePhone()];
      await insertVoters(t, ws, 4, (i) => ({
        phone: phones[i]!,
        email: `v${i}.${ws}@example.com`,
        constituency: ['North', 'north', 'South', 'East'][i],
      }));
      await create(owner, { constituency: 'NORTH', starts_at: at(-hour), ends_at: at(hour) });
      // One for East that is not in force yet, one for South that has ended.
      await create(owner, { constituency: 'East', starts_at: at(hour), ends_at: at(2 * hour) });
      await create(owner, { constituency: 'South', starts_at: at(-2 * hour), ends_at: at(-hour) });
      const segment = await call(t.app, 'POST', '/api/segments', {
        token: owner.token,
        body: { name: 'All', filters: {} },
      });
      const outcome = async (channel: string) => {
        const res = await call(t.app, 'POST', '/api/messages/broadcast', {
          token: owner.token,
          body: {
            channel,
            message: 'Vote for us',
            segment_id: segment.body.data.id,
            ...(channel === 'email' ? { subject: 'Vote' } : {}),
          },
        });
        expect(res.status).toBe(202);
        const id = Number(String(res.body.data.campaign_id).slice(5));
        await until(async () => {
          await worker.drain();
          const c = await call(t.app, 'GET', `/api/campaigns/camp_${id}`, { token: owner.token });
          return c.body.data.status === 'completed';
        }, 'the broadcast to complete');
        const rows = await t.db.kysely
          .selectFrom('messages')
          .select(['to', 'status', 'error_code'])
          .where('campaign_id', '=', id)
          .execute();
        return new Map(rows.map((r) => [r.to, [r.status, r.error_code]]));
      };
      for (const channel of ['sms', 'whatsapp', 'ivr']) {
        const byPhone = await outcome(channel);
        expect(byPhone.get(phones[0]!)).toEqual(['failed', 'silence_period']);
        expect(byPhone.get(phones[1]!)).toEqual(['failed', 'silence_period']);
        expect(byPhone.get(phones[2]!)).toEqual(['delivered', null]);
        expect(byPhone.get(phones[3]!)).toEqual(['delivered', null]);
      }
      // Email is not ruled by silence periods.
      const email = await outcome('email');
      expect([...email.values()].every(([status]) => status === 'delivered')).toBe(true);
      // Each of sms and whatsapp paid for the two delivered messages only; email for four.
      expect(await credits(owner)).toMatchObject({
        sms_credits: 98,
        whatsapp_credits: 98,
        email_credits: 96,
      });
      // A single send is not a bulk message.
      const single = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: phones[0], message: 'Your grievance is resolved' },
      });
      expect(single.status).toBe(201);
    });
  });
}
