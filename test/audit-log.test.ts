import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { pruneAuditLog } from '../src/modules/audit/audit.repository.ts';
import {
  addMember,
  type Account,
  buildTestApp,
  call,
  dialects,
  expectError,
  register,
  type TestApp,
  uniquePhone,
} from './helpers.ts';

interface Entry {
  id: number;
  action: string;
  actor_id: number | null;
  actor_name: string | null;
  target_type: string | null;
  target_id: string | null;
  ip: string | null;
  details: Record<string, unknown> | null;
  created_at: string;
}

const silent = pino({ level: 'silent' });

for (const dialect of dialects) {
  describe(`audit log (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect, { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', QUIET_HOURS: '' });
    });
    afterAll(() => t.close());

    const entries = async (owner: Account, query = ''): Promise<Entry[]> => {
      const res = await call(t.app, 'GET', `/api/audit-log?per_page=100${query}`, { token: owner.token });
      expect(res.status).toBe(200);
      return res.body.data.data as Entry[];
    };

    it('records team, password, campaign, webhook and payment actions with actor, target and details, newest first', async () => {
      const owner = await register(t.app, { name: 'Asha Rao' });
      const member = await addMember(t.app, owner, 'volunteer');
      await call(t.app, 'PATCH', `/api/users/${member.user.id}`, {
        token: owner.token,
        body: { role: 'manager' },
      });
      await call(t.app, 'DELETE', `/api/users/${member.user.id}`, { token: owner.token });
      await call(t.app, 'POST', '/api/user/password', {
        token: owner.token,
        body: { current_password: owner.password, password: 'another long phrase' },
      });
      const broadcast = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Rally at 5', recipients: [uniquePhone()] },
      });
      expect(broadcast.status).toBe(202);
      const campaign = await call(t.app, 'POST', '/api/campaigns', {
        token: owner.token,
        body: { name: 'Door to door', channel: 'sms', message: 'Meet us', recipients: [uniquePhone()] },
      });
      const campaignId = campaign.body.data.id as string;
      expect(
        (await call(t.app, 'POST', `/api/campaigns/${campaignId}/send`, { token: owner.token })).status,
      ).toBe(202);
      await call(t.app, 'POST', `/api/campaigns/${campaignId}/cancel`, { token: owner.token });
      const hook = await call(t.app, 'POST', '/api/webhooks', {
        token: owner.token,
        body: { url: 'http://127.0.0.1:9/hook?token=receiver-secret' },
      });
      expect(hook.status).toBe(201);
      await call(t.app, 'PATCH', `/api/webhooks/${hook.body.data.id}`, {
        token: owner.token,
        body: { description: 'CRM' },
      });
      await call(t.app, 'DELETE', `/api/webhooks/${hook.body.data.id}`, { token: owner.token });
      expect(
        (await call(t.app, 'POST', '/api/payments', { token: owner.token, body: { sms_credits: 10 } }))
          .status,
      ).toBe(201);

      const list = await entries(owner);
      expect(list.map((e) => e.action)).toEqual([
        'payment.created',
        'webhook.deleted',
        'webhook.updated',
        'webhook.created',
        'campaign.cancelled',
        'campaign.sent',
        'broadcast.created',
        'auth.password_changed',
        'user.deactivated',
        'user.updated',
        'user.created',
        'user.created',
      ]);
      expect(list.map((e) => e.id)).toEqual([...list.map((e) => e.id)].sort((a, b) => b - a));
      for (const e of list) {
        expect(e.actor_id).toBe(owner.user.id);
        expect(e.actor_name).toBe('Asha Rao');
        expect(e.ip).toBeTruthy();
        expect(e.created_at).toMatch(/Z$/);
      }
      const byAction = (action: string) => list.filter((e) => e.action === action);
      expect(byAction('user.updated')[0]).toMatchObject({
        target_type: 'user',
        target_id: String(member.user.id),
        details: { role: { from: 'volunteer', to: 'manager' } },
      });
      expect(byAction('user.deactivated')[0]?.details).toMatchObject({ tokens_revoked: 1 });
      expect(byAction('campaign.sent')[0]).toMatchObject({ target_type: 'campaign', target_id: campaignId });
      expect(byAction('broadcast.created')[0]).toMatchObject({ target_id: broadcast.body.data.campaign_id });
      expect(byAction('webhook.created')[0]?.details).toMatchObject({ url: 'http://127.0.0.1:9/hook' });
      expect(JSON.stringify(list)).not.toContain('whsec_');
      expect(JSON.stringify(list)).not.toContain('receiver-secret');
      expect(byAction('payment.created')[0]?.details).toMatchObject({ sms: 10 });
      expect(byAction('user.created').map((e) => e.target_id)).toEqual([
        String(member.user.id),
        String(owner.user.id),
      ]);
    });

    it('filters by action, actor and dates, validates them, and pages', async () => {
      const owner = await register(t.app);
      const second = await addMember(t.app, owner, 'manager');
      await call(t.app, 'PATCH', `/api/users/${second.user.id}`, {
        token: owner.token,
        body: { role: 'politician' },
      });
      await call(t.app, 'PATCH', `/api/users/${owner.user.id}`, {
        token: second.token,
        body: { name: 'Renamed' },
      });
      const updated = await entries(owner, '&action=user.updated');
      expect(updated).toHaveLength(2);
      expect(updated[0]).toMatchObject({ actor_id: second.user.id, details: { name: { to: 'Renamed' } } });
      expect((await entries(owner, `&actor_id=${second.user.id}`)).map((e) => e.action)).toEqual([
        'user.updated',
      ]);
      const today = new Date().toISOString().slice(0, 10);
      expect(await entries(owner, `&date_from=${today}&date_to=${today}`)).toHaveLength(4);
      expect(await entries(owner, '&date_to=2020-01-01')).toHaveLength(0);
      // The widest range the dates allow holds everything (a bound past 9999 is not written `+010000-...`).
      expect(await entries(owner, '&date_from=0000-01-01&date_to=9999-12-31')).toHaveLength(4);
      expect(await entries(owner, '&date_to=9999-12-31T23:59:59.999Z')).toHaveLength(4);
      expect(await entries(owner, `&date_from=${today}&date_to=9999-12-31T20:00:00-05:00`)).toHaveLength(4);
      expect(
        await entries(owner, `&date_from=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`),
      ).toHaveLength(0);
      const page = await call(t.app, 'GET', '/api/audit-log?per_page=3&page=2', { token: owner.token });
      expect(page.body.data).toMatchObject({ total: 4, per_page: 3, current_page: 2, last_page: 2 });
      expect(page.body.data.data).toHaveLength(1);
      for (const q of [
        'action=user.exploded',
        'actor_id=abc',
        'date_from=yesterday',
        'date_to=2026-13-01',
        'per_page=500',
        'sort=asc',
      ]) {
        const res = await call(t.app, 'GET', `/api/audit-log?${q}`, { token: owner.token });
        expectError(res, 422, 'validation_error');
        expect(Object.keys(res.body.details)).toEqual([q.split('=')[0]]);
      }
    });

    it("only politicians read it, only their own workspace's, and nobody changes or deletes it", async () => {
      const owner = await register(t.app);
      const stranger = await register(t.app);
      const manager = await addMember(t.app, owner, 'manager');
      const volunteer = await addMember(t.app, owner, 'volunteer');
      for (const member of [manager, volunteer]) {
        expectError(await call(t.app, 'GET', '/api/audit-log', { token: member.token }), 403, 'forbidden');
      }
      expectError(await call(t.app, 'GET', '/api/audit-log'), 401, 'unauthorized');
      const mine = await entries(owner);
      const theirs = await entries(stranger);
      expect(theirs.map((e) => e.target_id)).toEqual([String(stranger.user.id)]);
      expect(mine.some((e) => theirs.some((x) => x.id === e.id))).toBe(false);
      const id = mine[0]?.id;
      for (const [method, url] of [
        ['DELETE', '/api/audit-log'],
        ['DELETE', `/api/audit-log/${id}`],
        ['PATCH', `/api/audit-log/${id}`],
        ['PUT', `/api/audit-log/${id}`],
        ['POST', '/api/audit-log'],
      ] as const) {
        const res = await call(t.app, method, url, { token: owner.token, body: { action: 'user.created' } });
        expect([404, 405]).toContain(res.status);
      }
      expect(await entries(owner)).toEqual(mine);
    });

    it('an entry is rolled back with its action', async () => {
      const owner = await register(t.app);
      const campaign = await call(t.app, 'POST', '/api/campaigns', {
        token: owner.token,
        body: { name: 'Once', channel: 'sms', message: 'Hi', recipients: [uniquePhone()] },
      });
      const url = `/api/campaigns/${campaign.body.data.id}/cancel`;
      expect((await call(t.app, 'POST', url, { token: owner.token })).status).toBe(200);
      // The second cancel is refused (409) and records nothing.
      expectError(await call(t.app, 'POST', url, { token: owner.token }), 409, 'conflict');
      expect(await entries(owner, '&action=campaign.cancelled')).toHaveLength(1);
      expectError(
        await call(t.app, 'DELETE', `/api/users/${owner.user.id}`, { token: owner.token }),
        409,
        'conflict',
      );
      expect(await entries(owner, '&action=user.deactivated')).toHaveLength(0);
      expectError(
        await call(t.app, 'DELETE', '/api/webhooks/99999999', { token: owner.token }),
        404,
        'not_found',
      );
      expect(await entries(owner, '&action=webhook.deleted')).toHaveLength(0);
    });

    it('a scheduled campaign started by the worker is recorded as sent by the service (no actor)', async () => {
      const owner = await register(t.app);
      const res = await call(t.app, 'POST', '/api/campaigns', {
        token: owner.token,
        body: {
          name: 'Later',
          channel: 'sms',
          message: 'Hi',
          recipients: [uniquePhone()],
          scheduled_at: new Date(Date.now() + 3_600_000).toISOString(),
        },
      });
      expect(res.status).toBe(201);
      const id = Number(String(res.body.data.id).slice('camp_'.length));
      await t.db.kysely
        .updateTable('campaigns')
        .set({ scheduled_at: new Date(Date.now() - 1000).toISOString() })
        .where('id', '=', id)
        .execute();
      const worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
      await worker.round();
      const sent = await entries(owner, '&action=campaign.sent');
      expect(sent).toHaveLength(1);
      expect(sent[0]).toMatchObject({ actor_id: null, actor_name: null, target_id: `camp_${id}` });
    });

    it('the worker prunes entries older than AUDIT_RETENTION_DAYS, in bounded batches', async () => {
      const owner = await register(t.app);
      const workspaceId = owner.user.workspace_id;
      const old = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString();
      const row = (created_at: string) => ({
        workspace_id: workspaceId,
        action: 'user.updated',
        actor_id: null,
        created_at,
      });
      await t.db.kysely
        .insertInto('audit_log')
        .values([...Array.from({ length: 25 }, () => row(old(400))), row(old(300))])
        .execute();
      const count = async () =>
        Number(
          (
            await t.db.kysely
              .selectFrom('audit_log')
              .select((eb) => eb.fn.countAll<number>().as('n'))
              .where('workspace_id', '=', workspaceId)
              .executeTakeFirstOrThrow()
          ).n,
        );
      expect(await count()).toBe(27);
      // Two batches of ten at most: five of the old rows are left for the next round.
      expect(await pruneAuditLog(t.db.kysely, old(365), 10, 2)).toBeGreaterThanOrEqual(20);
      expect(await count()).toBeLessThanOrEqual(7);
      const worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
      await worker.round();
      await vi.waitFor(async () => expect(await count()).toBe(2));
      const left = await entries(owner);
      expect(left.map((e) => e.action)).toEqual(['user.updated', 'user.created']);
    });
  });
}
