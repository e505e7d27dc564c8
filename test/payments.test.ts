import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addMember,
  type Account,
  buildTestApp,
  call,
  dialects,
  expectError,
  register,
  type TestApp,
} from './helpers.ts';

for (const dialect of dialects) {
  describe(`payments (${dialect})`, () => {
    let t: TestApp;
    let owner: Account;
    beforeAll(async () => {
      t = await buildTestApp(dialect, { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
      owner = await register(t.app);
    });
    afterAll(() => t.close());

    it('the sandbox gateway completes at once, adds the credits through the ledger and answers the new balance', async () => {
      const office = await register(t.app);
      const res = await call(t.app, 'POST', '/api/payments', {
        token: office.token,
        body: { sms_credits: 1000, email_credits: 50 },
      });
      expect(res.status).toBe(201);
      // No payment provider is built: the answer says the credits are recorded and nothing was charged.
      expect(res.body.message).toMatch(/nothing was charged/);
      const { payment, credits } = res.body.data;
      expect(payment).toMatchObject({
        status: 'completed',
        gateway: 'sandbox',
        charged: false,
        sms_credits: 1000,
        whatsapp_credits: 0,
        email_credits: 50,
      });
      expect(payment.created_at).toMatch(/Z$/);
      expect(payment.completed_at).toBe(payment.created_at);
      expect(credits).toEqual({ sms_credits: 1100, whatsapp_credits: 100, email_credits: 150 });
      expect((await call(t.app, 'GET', '/api/user', { token: office.token })).body.data.credits).toEqual(
        credits,
      );
      const ledger = await t.db.kysely
        .selectFrom('credit_ledger')
        .select(['channel', 'kind', 'amount', 'reference'])
        .where('workspace_id', '=', office.user.workspace_id)
        .where('kind', '=', 'purchase')
        .orderBy('id')
        .execute();
      expect(ledger.map((l) => ({ ...l, amount: Number(l.amount) }))).toEqual([
        { channel: 'sms', kind: 'purchase', amount: 1000, reference: `payment:${payment.id}` },
        { channel: 'email', kind: 'purchase', amount: 50, reference: `payment:${payment.id}` },
      ]);
    });

    it('with an Idempotency-Key, a repeat answers the first payment again and buys nothing', async () => {
      const office = await register(t.app);
      const buy = (key: string, body: object) =>
        call(t.app, 'POST', '/api/payments', {
          token: office.token,
          headers: { 'idempotency-key': key },
          body,
        });
      const first = await buy('top-up-1', { sms_credits: 500 });
      expect(first.status).toBe(201);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      const again = await buy('top-up-1', { sms_credits: 500 });
      expect(again.status).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toEqual(first.body);
      expectError(await buy('top-up-1', { sms_credits: 600 }), 422, 'validation_error');
      // A refused request frees its key: fixed, it goes through once.
      expectError(await buy('top-up-2', { sms_credits: -1 }), 422, 'validation_error');
      expect((await buy('top-up-2', { email_credits: 5 })).status).toBe(201);
      expect((await buy('top-up-2', { email_credits: 5 })).headers['idempotent-replayed']).toBe('true');
      // Another workspace's key of the same name is its own.
      const other = await register(t.app);
      const theirs = await call(t.app, 'POST', '/api/payments', {
        token: other.token,
        headers: { 'idempotency-key': 'top-up-1' },
        body: { sms_credits: 500 },
      });
      expect(theirs.status).toBe(201);
      expect(theirs.headers['idempotent-replayed']).toBeUndefined();

      const list = await call(t.app, 'GET', '/api/payments', { token: office.token });
      expect(list.body.data.total).toBe(2);
      expect((await call(t.app, 'GET', '/api/user', { token: office.token })).body.data.credits).toEqual({
        sms_credits: 600,
        whatsapp_credits: 100,
        email_credits: 105,
      });
    });

    it('lists the workspace payments newest first, in the page envelope', async () => {
      const office = await register(t.app);
      const other = await register(t.app);
      const ids: number[] = [];
      for (const n of [1, 2, 3]) {
        const res = await call(t.app, 'POST', '/api/payments', {
          token: office.token,
          body: { whatsapp_credits: n },
        });
        ids.push(res.body.data.payment.id);
      }
      await call(t.app, 'POST', '/api/payments', { token: other.token, body: { sms_credits: 9 } });
      const res = await call(t.app, 'GET', '/api/payments?per_page=2', { token: office.token });
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ current_page: 1, per_page: 2, total: 3, last_page: 2 });
      expect(res.body.data.data.map((p: { id: number }) => p.id)).toEqual([ids[2], ids[1]]);
      const mine = await call(t.app, 'GET', `/api/payments/${ids[0]}`, { token: office.token });
      expect(mine.body.data).toMatchObject({ id: ids[0], whatsapp_credits: 1 });
      expectError(
        await call(t.app, 'GET', `/api/payments/${ids[0]}`, { token: other.token }),
        404,
        'not_found',
      );
      expectError(
        await call(t.app, 'GET', '/api/payments/abc', { token: office.token }),
        422,
        'validation_error',
      );
      const theirs = await call(t.app, 'GET', '/api/payments', { token: other.token });
      expect(theirs.body.data.total).toBe(1);
      expect(theirs.body.data.data[0].sms_credits).toBe(9);
    });

    it('emits payment.processed with the payment and the new balance, in the same transaction', async () => {
      const office = await register(t.app);
      await call(t.app, 'POST', '/api/webhooks', {
        token: office.token,
        body: { url: 'http://127.0.0.1:9/never-called', events: ['payment.processed'] },
      });
      const res = await call(t.app, 'POST', '/api/payments', {
        token: office.token,
        body: { sms_credits: 5 },
      });
      const events = await t.db.kysely
        .selectFrom('webhook_events')
        .select(['type', 'payload'])
        .where('workspace_id', '=', office.user.workspace_id)
        .execute();
      expect(events).toHaveLength(1);
      expect(events[0]!.type).toBe('payment.processed');
      expect(JSON.parse(events[0]!.payload)).toEqual(res.body.data);
    });

    it('validates the amounts', async () => {
      const bad = async (body: unknown, fields: string[]) => {
        const res = await call(t.app, 'POST', '/api/payments', { token: owner.token, body });
        expectError(res, 422, 'validation_error');
        for (const field of fields)
          expect(Object.keys(res.body.details), JSON.stringify(body)).toContain(field);
      };
      await bad({}, ['sms_credits', 'whatsapp_credits', 'email_credits']);
      await bad({ sms_credits: 0, whatsapp_credits: 0, email_credits: 0 }, ['sms_credits']);
      await bad({ sms_credits: -5 }, ['sms_credits']);
      await bad({ sms_credits: 1.5 }, ['sms_credits']);
      await bad({ sms_credits: '100' }, ['sms_credits']);
      await bad({ whatsapp_credits: 1_000_001 }, ['whatsapp_credits']);
      await bad({ email_credits: 10, gateway: 'stripe' }, ['gateway']);
      await bad({ email_credits: 10, amount: 99 }, ['amount']);
      expectError(
        await call(t.app, 'GET', '/api/payments?per_page=0', { token: owner.token }),
        422,
        'validation_error',
      );
      const before = (await call(t.app, 'GET', '/api/user', { token: owner.token })).body.data.credits;
      expect(before).toEqual({ sms_credits: 100, whatsapp_credits: 100, email_credits: 100 });
    });

    it('is for politicians only', async () => {
      const manager = await addMember(t.app, owner, 'manager');
      const volunteer = await addMember(t.app, owner, 'volunteer');
      for (const member of [manager, volunteer]) {
        expectError(
          await call(t.app, 'POST', '/api/payments', { token: member.token, body: { sms_credits: 10 } }),
          403,
          'forbidden',
        );
        expectError(await call(t.app, 'GET', '/api/payments', { token: member.token }), 403, 'forbidden');
        expectError(await call(t.app, 'GET', '/api/payments/1', { token: member.token }), 403, 'forbidden');
      }
      expectError(
        await call(t.app, 'POST', '/api/payments', { body: { sms_credits: 10 } }),
        401,
        'unauthorized',
      );
      expectError(await call(t.app, 'GET', '/api/payments'), 401, 'unauthorized');
    });
  });
}
