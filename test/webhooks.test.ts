import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emitEvent } from '../src/modules/webhooks/webhooks.events.ts';
import { webhookSecretBox } from '../src/modules/webhooks/webhooks.secrets.ts';
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
import { type Receiver, startReceiver, until, workerFor } from './webhook-receivers.ts';

const env = { WEBHOOK_RETRY_SCHEDULE: '0,0,0', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' };
const allEvents = [
  'message.delivered',
  'message.failed',
  'grievance.created',
  'grievance.resolved',
  'payment.processed',
  'message.received',
  'channel_account.failed',
  'conversation.created',
  'conversation.assigned',
  'survey.response.completed',
  'privacy_request.due_soon',
];

async function createHook(t: TestApp, owner: Account, body: Record<string, unknown>) {
  const res = await call(t.app, 'POST', '/api/webhooks', { token: owner.token, body });
  if (res.status !== 201) throw new Error(`create webhook: ${res.status} ${res.raw}`);
  return res.body.data as { id: number; secret: string; url: string; events: string[]; active: boolean };
}

async function createGrievance(t: TestApp, account: Account, body: Record<string, unknown> = {}) {
  const res = await call(t.app, 'POST', '/api/grievances', {
    token: account.token,
    body: { title: 'Street light broken', ...body },
  });
  if (res.status !== 201) throw new Error(`create grievance: ${res.status} ${res.raw}`);
  return res.body.data as { id: number; title: string; status: string };
}

async function deliveries(t: TestApp, owner: Account, hookId: number) {
  const res = await call(t.app, 'GET', `/api/webhooks/${hookId}/deliveries`, { token: owner.token });
  expect(res.status).toBe(200);
  return res.body.data as {
    data: {
      id: number;
      event_id: string;
      event_type: string;
      status: string;
      attempts: number;
      last_status_code: number | null;
      last_error: string | null;
      next_attempt_at: string | null;
    }[];
    total: number;
  };
}

for (const dialect of dialects) {
  describe(`webhooks (${dialect})`, () => {
    let t: TestApp;
    const receivers: Receiver[] = [];
    const receiver = async (answer?: Parameters<typeof startReceiver>[0]) => {
      const r = await startReceiver(answer);
      receivers.push(r);
      return r;
    };
    beforeAll(async () => {
      t = await buildTestApp(dialect, env);
    });
    afterAll(async () => {
      await Promise.all(receivers.map((r) => r.close()));
      await t.close();
    });

    describe('endpoints', () => {
      it('creates with a whsec_ secret shown once, all events by default; lists, reads, updates, deletes', async () => {
        const owner = await register(t.app);
        const res = await call(t.app, 'POST', '/api/webhooks', {
          token: owner.token,
          body: { url: 'https://hooks.example.com/ces', description: 'CRM sync' },
        });
        expect(res.status).toBe(201);
        const hook = res.body.data;
        expect(hook).toMatchObject({
          url: 'https://hooks.example.com/ces',
          description: 'CRM sync',
          events: allEvents,
          active: true,
          disabled_reason: null,
        });
        expect(hook.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
        expect(Buffer.from(hook.secret.slice(6), 'base64')).toHaveLength(32);

        const one = await call(t.app, 'GET', `/api/webhooks/${hook.id}`, { token: owner.token });
        expect(one.status).toBe(200);
        expect(one.body.data).not.toHaveProperty('secret');
        expect(one.body.data.id).toBe(hook.id);

        const list = await call(t.app, 'GET', '/api/webhooks', { token: owner.token });
        expect(list.body.data).toMatchObject({ current_page: 1, per_page: 15, total: 1, last_page: 1 });
        expect(list.body.data.data[0]).not.toHaveProperty('secret');

        const patched = await call(t.app, 'PATCH', `/api/webhooks/${hook.id}`, {
          token: owner.token,
          body: { events: ['payment.processed'], description: null, active: false },
        });
        expect(patched.status).toBe(200);
        expect(patched.body.data).toMatchObject({
          events: ['payment.processed'],
          description: null,
          active: false,
        });
        expect(patched.body.data.disabled_reason).toMatch(/turned off/);
        const on = await call(t.app, 'PATCH', `/api/webhooks/${hook.id}`, {
          token: owner.token,
          body: { active: true },
        });
        expect(on.body.data).toMatchObject({ active: true, disabled_reason: null });

        const deleted = await call(t.app, 'DELETE', `/api/webhooks/${hook.id}`, { token: owner.token });
        expect(deleted.status).toBe(200);
        expectError(
          await call(t.app, 'GET', `/api/webhooks/${hook.id}`, { token: owner.token }),
          404,
          'not_found',
        );
        expectError(
          await call(t.app, 'DELETE', `/api/webhooks/${hook.id}`, { token: owner.token }),
          404,
          'not_found',
        );
      });

      it('stores the secret encrypted: the row reveals neither the secret nor its key bytes', async () => {
        const owner = await register(t.app);
        const hook = await createHook(t, owner, { url: 'https://hooks.example.com/x' });
        const row = await t.db.kysely
          .selectFrom('webhooks')
          .selectAll()
          .where('id', '=', hook.id)
          .executeTakeFirstOrThrow();
        const dump = JSON.stringify(row);
        const keyBase64 = hook.secret.slice('whsec_'.length);
        expect(dump).not.toContain(keyBase64);
        expect(dump).not.toContain(Buffer.from(keyBase64, 'base64').toString('hex'));
        expect(dump).not.toContain(Buffer.from(keyBase64, 'base64').toString('base64url'));
        expect(row.secret_encrypted).toMatch(/^v1\./);
      });

      it('validates every field', async () => {
        const owner = await register(t.app);
        const bad = async (body: unknown, field: string) => {
          const res = await call(t.app, 'POST', '/api/webhooks', { token: owner.token, body });
          expectError(res, 422, 'validation_error');
          expect(Object.keys(res.body.details)).toContain(field);
        };
        await bad({}, 'url');
        await bad({ url: 'not a url' }, 'url');
        await bad({ url: 'ftp://example.com/x' }, 'url');
        await bad({ url: 'https://user:pw@example.com/x' }, 'url');
        await bad({ url: `https://example.com/${'a'.repeat(2048)}` }, 'url');
        await bad({ url: 42 }, 'url');
        await bad({ url: 'https://example.com', events: [] }, 'events');
        await bad({ url: 'https://example.com', events: ['voter.created'] }, 'events.0');
        await bad(
          { url: 'https://example.com', events: ['payment.processed', 'payment.processed'] },
          'events',
        );
        await bad({ url: 'https://example.com', events: ['ping'] }, 'events.0');
        await bad({ url: 'https://example.com', description: 'x'.repeat(501) }, 'description');
        await bad({ url: 'https://example.com', secret: 'whsec_mine' }, 'secret');
        const hook = await createHook(t, owner, { url: 'https://example.com/h' });
        for (const [body, field] of [
          [{}, 'body'],
          [{ active: 'yes' }, 'active'],
          [{ url: 'gopher://x' }, 'url'],
          [{ events: ['nope'] }, 'events.0'],
        ] as const) {
          const res = await call(t.app, 'PATCH', `/api/webhooks/${hook.id}`, { token: owner.token, body });
          expectError(res, 422, 'validation_error');
          expect(Object.keys(res.body.details)).toContain(field);
        }
        for (const url of [
          '/api/webhooks/abc',
          '/api/webhooks/0',
          `/api/webhooks/${hook.id}/deliveries?per_page=101`,
          `/api/webhooks/${hook.id}/deliveries/abc/retry`,
          '/api/webhooks?page=0',
        ]) {
          const method = url.endsWith('/retry') ? 'POST' : 'GET';
          expectError(await call(t.app, method, url, { token: owner.token }), 422, 'validation_error');
        }
      });

      it('is for politicians only', async () => {
        const owner = await register(t.app);
        const hook = await createHook(t, owner, { url: 'https://example.com/h' });
        const manager = await addMember(t.app, owner, 'manager');
        const volunteer = await addMember(t.app, owner, 'volunteer');
        const routes: [string, string, unknown?][] = [
          ['POST', '/api/webhooks', { url: 'https://example.com/x' }],
          ['GET', '/api/webhooks'],
          ['GET', `/api/webhooks/${hook.id}`],
          ['PATCH', `/api/webhooks/${hook.id}`, { description: 'x' }],
          ['DELETE', `/api/webhooks/${hook.id}`],
          ['GET', `/api/webhooks/${hook.id}/deliveries`],
          ['POST', `/api/webhooks/${hook.id}/deliveries/1/retry`],
          ['POST', `/api/webhooks/${hook.id}/test`],
        ];
        for (const [method, url, body] of routes) {
          for (const member of [manager, volunteer]) {
            expectError(await call(t.app, method, url, { token: member.token, body }), 403, 'forbidden');
          }
          expectError(await call(t.app, method, url, { body }), 401, 'unauthorized');
        }
        expect((await call(t.app, 'GET', `/api/webhooks/${hook.id}`, { token: owner.token })).status).toBe(
          200,
        );
      });

      it("never shows or touches another workspace's endpoint or deliveries", async () => {
        const owner = await register(t.app);
        const other = await register(t.app);
        const r = await receiver();
        const hook = await createHook(t, owner, { url: r.url });
        await createGrievance(t, owner);
        const [delivery] = (await deliveries(t, owner, hook.id)).data;
        for (const [method, url, body] of [
          ['GET', `/api/webhooks/${hook.id}`],
          ['PATCH', `/api/webhooks/${hook.id}`, { description: 'mine now' }],
          ['GET', `/api/webhooks/${hook.id}/deliveries`],
          ['POST', `/api/webhooks/${hook.id}/deliveries/${delivery!.id}/retry`],
          ['POST', `/api/webhooks/${hook.id}/test`],
          ['DELETE', `/api/webhooks/${hook.id}`],
        ] as [string, string, unknown?][]) {
          expectError(await call(t.app, method, url, { token: other.token, body }), 404, 'not_found');
        }
        // Another workspace's own endpoint cannot reach this delivery through its id either.
        const otherHook = await createHook(t, other, { url: r.url });
        expectError(
          await call(t.app, 'POST', `/api/webhooks/${otherHook.id}/deliveries/${delivery!.id}/retry`, {
            token: other.token,
          }),
          404,
          'not_found',
        );
        const list = await call(t.app, 'GET', '/api/webhooks', { token: other.token });
        expect(list.body.data.data.map((h: { id: number }) => h.id)).toEqual([otherHook.id]);
        // The other workspace's grievances do not reach this workspace's endpoint.
        await createGrievance(t, other);
        expect((await deliveries(t, owner, hook.id)).total).toBe(1);
        expect((await call(t.app, 'GET', `/api/webhooks/${hook.id}`, { token: owner.token })).status).toBe(
          200,
        );
      });
    });

    describe('delivery', () => {
      it('signs per Standard Webhooks: the standardwebhooks package verifies it; body { type, timestamp, data }', async () => {
        const owner = await register(t.app);
        const r = await receiver();
        const hook = await createHook(t, owner, { url: r.url, events: ['grievance.created'] });
        const grievance = await createGrievance(t, owner, { category: 'roads', priority: 'high' });
        await workerFor(t, [owner.user.workspace_id]).drain();
        expect(r.received).toHaveLength(1);
        const [request] = r.received;
        const headers = request!.headers as Record<string, string>;
        expect(headers['content-type']).toBe('application/json');
        expect(headers['webhook-id']).toMatch(/^evt_\d+$/);
        expect(headers['webhook-timestamp']).toMatch(/^\d{10}$/);
        expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
        const verified = new StandardWebhook(hook.secret).verify(request!.body, headers) as {
          type: string;
          timestamp: string;
          data: Record<string, unknown>;
        };
        expect(verified.type).toBe('grievance.created');
        expect(verified.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
        expect(verified.data).toEqual(
          (await call(t.app, 'GET', `/api/grievances/${grievance.id}`, { token: owner.token })).body.data,
        );
        // A different secret does not verify.
        const wrong = new StandardWebhook(`whsec_${Buffer.alloc(32, 7).toString('base64')}`);
        expect(() => wrong.verify(request!.body, headers)).toThrow();
        const log = await deliveries(t, owner, hook.id);
        expect(log.data[0]).toMatchObject({
          event_id: headers['webhook-id'],
          event_type: 'grievance.created',
          status: 'succeeded',
          attempts: 1,
          last_status_code: 200,
          last_error: null,
          next_attempt_at: null,
        });
      });

      it('sends each endpoint only the events it subscribes to', async () => {
        const owner = await register(t.app);
        const grievancesOnly = await receiver();
        const paymentsOnly = await receiver();
        await createHook(t, owner, {
          url: grievancesOnly.url,
          events: ['grievance.created', 'grievance.resolved'],
        });
        await createHook(t, owner, { url: paymentsOnly.url, events: ['payment.processed'] });
        await createGrievance(t, owner);
        const paid = await call(t.app, 'POST', '/api/payments', {
          token: owner.token,
          body: { sms_credits: 500 },
        });
        expect(paid.status).toBe(201);
        await workerFor(t, [owner.user.workspace_id]).drain();
        expect(grievancesOnly.received.map((x) => x.json.type)).toEqual(['grievance.created']);
        expect(paymentsOnly.received.map((x) => x.json.type)).toEqual(['payment.processed']);
        expect(paymentsOnly.received[0]!.json.data).toEqual(paid.body.data);
        expect(paymentsOnly.received[0]!.json.data.credits.sms_credits).toBe(600);
      });

      it('a receiver failing twice gets the event on the third attempt, with the same webhook-id', async () => {
        const owner = await register(t.app);
        const r = await receiver((n) => (n <= 2 ? 500 : 204));
        const hook = await createHook(t, owner, { url: r.url });
        await createGrievance(t, owner);
        await workerFor(t, [owner.user.workspace_id]).drain();
        expect(r.received).toHaveLength(3);
        const ids = new Set(r.received.map((x) => x.headers['webhook-id']));
        expect(ids.size).toBe(1);
        expect(new Set(r.received.map((x) => x.body)).size).toBe(1);
        for (const x of r.received) {
          expect(() =>
            new StandardWebhook(hook.secret).verify(x.body, x.headers as Record<string, string>),
          ).not.toThrow();
        }
        const [delivery] = (await deliveries(t, owner, hook.id)).data;
        expect(delivery).toMatchObject({
          status: 'succeeded',
          attempts: 3,
          last_status_code: 204,
          last_error: null,
        });
      });

      it('a receiver that never succeeds ends failed once the schedule is spent; a manual retry sends it again', async () => {
        const owner = await register(t.app);
        let healthy = false;
        const r = await receiver(() => (healthy ? 200 : 503));
        const hook = await createHook(t, owner, { url: r.url });
        await createGrievance(t, owner);
        const worker = workerFor(t, [owner.user.workspace_id]);
        await worker.drain();
        // Schedule 0,0,0: the first attempt and three retries.
        expect(r.received).toHaveLength(4);
        const [delivery] = (await deliveries(t, owner, hook.id)).data;
        expect(delivery).toMatchObject({
          status: 'failed',
          attempts: 4,
          last_status_code: 503,
          last_error: 'HTTP 503',
          next_attempt_at: null,
        });
        healthy = true;
        const retried = await call(
          t.app,
          'POST',
          `/api/webhooks/${hook.id}/deliveries/${delivery!.id}/retry`,
          {
            token: owner.token,
          },
        );
        expect(retried.status).toBe(202);
        expect(retried.body.data).toMatchObject({ id: delivery!.id, status: 'pending', attempts: 4 });
        await worker.drain();
        expect(r.received).toHaveLength(5);
        expect(r.received[4]!.headers['webhook-id']).toBe(r.received[0]!.headers['webhook-id']);
        expect((await deliveries(t, owner, hook.id)).data[0]).toMatchObject({
          status: 'succeeded',
          attempts: 5,
        });
        expectError(
          await call(t.app, 'POST', `/api/webhooks/${hook.id}/deliveries/999999999/retry`, {
            token: owner.token,
          }),
          404,
          'not_found',
        );
      });

      it('a 410 disables the endpoint: no further deliveries until it is turned on again', async () => {
        const owner = await register(t.app);
        const r = await receiver((n) => (n === 1 ? 410 : 200));
        const hook = await createHook(t, owner, { url: r.url });
        await createGrievance(t, owner);
        const worker = workerFor(t, [owner.user.workspace_id]);
        await worker.drain();
        expect(r.received).toHaveLength(1);
        const read = await call(t.app, 'GET', `/api/webhooks/${hook.id}`, { token: owner.token });
        expect(read.body.data).toMatchObject({ active: false });
        expect(read.body.data.disabled_reason).toMatch(/410/);
        expect((await deliveries(t, owner, hook.id)).data[0]).toMatchObject({
          status: 'failed',
          attempts: 1,
          last_status_code: 410,
        });
        await createGrievance(t, owner);
        await worker.drain();
        expect(r.received).toHaveLength(1);
        expect((await deliveries(t, owner, hook.id)).total).toBe(1);
        expectError(
          await call(t.app, 'POST', `/api/webhooks/${hook.id}/test`, { token: owner.token }),
          409,
          'conflict',
        );
        await call(t.app, 'PATCH', `/api/webhooks/${hook.id}`, {
          token: owner.token,
          body: { active: true },
        });
        await createGrievance(t, owner);
        await worker.drain();
        expect(r.received).toHaveLength(2);
      });

      it('does not follow redirects', async () => {
        const owner = await register(t.app);
        const target = await receiver();
        const r = await receiver((_n, res) => {
          res.setHeader('location', target.url);
          return 302;
        });
        const hook = await createHook(t, owner, { url: r.url });
        await createGrievance(t, owner);
        await workerFor(t, [owner.user.workspace_id]).drain();
        expect(r.received).toHaveLength(4);
        expect(target.connections).toBe(0);
        const [delivery] = (await deliveries(t, owner, hook.id)).data;
        expect(delivery).toMatchObject({ status: 'failed', last_status_code: 302 });
        expect(delivery!.last_error).toMatch(/redirects are not followed/);
      });

      it('the test route pings that endpoint only', async () => {
        const owner = await register(t.app);
        const pinged = await receiver();
        const other = await receiver();
        const hook = await createHook(t, owner, { url: pinged.url, events: ['payment.processed'] });
        await createHook(t, owner, { url: other.url });
        const res = await call(t.app, 'POST', `/api/webhooks/${hook.id}/test`, { token: owner.token });
        expect(res.status).toBe(202);
        expect(res.body.data).toMatchObject({ status: 'pending' });
        expect(res.body.data.event_id).toMatch(/^evt_\d+$/);
        await workerFor(t, [owner.user.workspace_id]).drain();
        expect(other.received).toHaveLength(0);
        expect(pinged.received).toHaveLength(1);
        const body = new StandardWebhook(hook.secret).verify(
          pinged.received[0]!.body,
          pinged.received[0]!.headers as Record<string, string>,
        );
        expect(body).toMatchObject({ type: 'ping', data: { webhook_id: hook.id } });
        expect(pinged.received[0]!.headers['webhook-id']).toBe(res.body.data.event_id);
        expect((await deliveries(t, owner, hook.id)).data[0]).toMatchObject({
          id: res.body.data.delivery_id,
          event_type: 'ping',
          status: 'succeeded',
        });
      });

      it('a delivery claimed by a worker that died is claimed again once its lease runs out', async () => {
        const owner = await register(t.app);
        const r = await receiver();
        const hook = await createHook(t, owner, { url: r.url });
        await createGrievance(t, owner);
        const worker = workerFor(t, [owner.user.workspace_id]);
        // A worker claims with a lease that lasts, then "dies": nobody else may take the delivery meanwhile.
        const now = new Date();
        const far = new Date(now.getTime() + 3600_000).toISOString();
        const held = (
          await t.db.kysely
            .updateTable('webhook_deliveries')
            .set({ claimed_by: 'dead-worker', lease_until: far })
            .where('workspace_id', '=', owner.user.workspace_id)
            .returning('id')
            .execute()
        ).map((row) => row.id);
        expect(held).toHaveLength(1);
        expect(await worker.runOnce()).toBe(0);
        expect(r.received).toHaveLength(0);
        // Its lease runs out (set to the past, as the clock would): another worker claims and delivers it.
        await t.db.kysely
          .updateTable('webhook_deliveries')
          .set({ lease_until: new Date(now.getTime() - 1000).toISOString() })
          .where('id', '=', held[0]!)
          .execute();
        await worker.drain();
        expect(r.received).toHaveLength(1);
        expect((await deliveries(t, owner, hook.id)).data[0]).toMatchObject({
          status: 'succeeded',
          attempts: 1,
        });
      });

      it('an endpoint whose secret was sealed under another APP_KEY is not called, and says why', async () => {
        const owner = await register(t.app);
        const r = await receiver();
        const hook = await createHook(t, owner, { url: r.url });
        await t.db.kysely
          .updateTable('webhooks')
          .set({ secret_encrypted: webhookSecretBox(Buffer.alloc(32, 1)).seal(hook.secret) })
          .where('id', '=', hook.id)
          .execute();
        await createGrievance(t, owner);
        await workerFor(t, [owner.user.workspace_id]).drain();
        expect(r.connections).toBe(0);
        const [delivery] = (await deliveries(t, owner, hook.id)).data;
        expect(delivery).toMatchObject({ status: 'failed', attempts: 4 });
        expect(delivery!.last_error).toMatch(/APP_KEY/);
      });

      it("emitEvent writes in the caller's transaction: a rollback leaves nothing, a commit is delivered", async () => {
        const owner = await register(t.app);
        const r = await receiver();
        await createHook(t, owner, { url: r.url, events: ['message.delivered'] });
        const message = {
          id: 'msg_1',
          channel: 'sms',
          to: '+919812345678',
          message: 'Hello',
          status: 'delivered',
          sent_at: new Date().toISOString(),
          campaign_id: null,
        };
        await expect(
          t.db.kysely.transaction().execute(async (trx) => {
            await emitEvent(trx, owner.user.workspace_id, 'message.delivered', message);
            throw new Error('the change failed');
          }),
        ).rejects.toThrow('the change failed');
        await t.db.kysely.transaction().execute(async (trx) => {
          expect(await emitEvent(trx, owner.user.workspace_id, 'message.failed', message)).toBeNull();
          expect(await emitEvent(trx, owner.user.workspace_id, 'message.delivered', message)).toEqual(
            expect.any(Number),
          );
        });
        await workerFor(t, [owner.user.workspace_id]).drain();
        expect(r.received.map((x) => x.json)).toEqual([
          { type: 'message.delivered', timestamp: expect.any(String), data: message },
        ]);
      });

      it('workers running side by side deliver every event exactly once', async () => {
        const owner = await register(t.app);
        const r = await receiver();
        await createHook(t, owner, { url: r.url, events: ['grievance.created'] });
        for (let i = 0; i < 12; i += 1) await createGrievance(t, owner, { title: `Grievance ${i}` });
        const workers = [1, 2, 3].map(() => workerFor(t, [owner.user.workspace_id]));
        await Promise.all(workers.map((w) => w.drain()));
        expect(r.received).toHaveLength(12);
        expect(new Set(r.received.map((x) => x.headers['webhook-id'])).size).toBe(12);
      });

      it('an attempt that gets no answer times out and is retried', async () => {
        const slow = await buildTestApp(dialect, {
          ...env,
          WEBHOOK_TIMEOUT_SECONDS: '1',
          WEBHOOK_RETRY_SCHEDULE: '0',
        });
        const owner = await register(slow.app);
        const held: ServerResponse[] = [];
        const silent = createServer((_req, res) => held.push(res));
        silent.listen(0, '127.0.0.1');
        await once(silent, 'listening');
        try {
          const hook = await createHook(slow, owner, {
            url: `http://127.0.0.1:${(silent.address() as AddressInfo).port}/`,
          });
          await createGrievance(slow, owner);
          await workerFor(slow, [owner.user.workspace_id]).drain();
          const [delivery] = (await deliveries(slow, owner, hook.id)).data;
          expect(delivery).toMatchObject({ status: 'failed', attempts: 2, last_status_code: null });
          expect(delivery!.last_error).toMatch(/timed out after 1 s/);
        } finally {
          silent.closeAllConnections();
          silent.close();
          await slow.close();
        }
      });

      it('the running loop delivers on its own and stops cleanly', async () => {
        const owner = await register(t.app);
        const r = await receiver();
        await createHook(t, owner, { url: r.url });
        const worker = workerFor(t, [owner.user.workspace_id]);
        worker.start();
        try {
          await createGrievance(t, owner);
          await until(() => r.received.length === 1);
        } finally {
          await worker.stop();
        }
        expect(r.received[0]!.json.type).toBe('grievance.created');
      });
    });

    it('the OpenAPI document describes the routes and, under webhooks, every event', async () => {
      const doc = (await call(t.app, 'GET', '/api/openapi.json')).body;
      for (const path of [
        '/api/webhooks',
        '/api/webhooks/{id}',
        '/api/webhooks/{id}/deliveries',
        '/api/webhooks/{id}/deliveries/{delivery_id}/retry',
        '/api/webhooks/{id}/test',
        '/api/grievances',
        '/api/grievances/{id}',
        '/api/payments',
      ]) {
        expect(doc.paths, path).toHaveProperty([path]);
      }
      expect(Object.keys(doc.webhooks)).toEqual([...allEvents, 'ping']);
      expect(doc.tags.map((tag: { name: string }) => tag.name)).toEqual(
        expect.arrayContaining(['Webhooks', 'Grievances', 'Payments']),
      );
    });

    it('an event survives the server being killed between the change and the delivery', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'ces-hooks-'));
      const restartEnv = {
        ...env,
        APP_KEY: Buffer.alloc(32, 9).toString('hex'),
        ...(dialect === 'sqlite' ? { DATABASE_URL: `sqlite:${join(dir, 'campaign.db')}` } : {}),
      };
      const r = await receiver();
      const first = await buildTestApp(dialect, restartEnv);
      let owner: Account;
      let hook: { id: number; secret: string };
      try {
        owner = await register(first.app);
        hook = await createHook(first, owner, { url: r.url });
        await createGrievance(first, owner, { title: 'Water supply cut' });
      } finally {
        // "Killed": closed before any worker ran.
        await first.close();
      }
      expect(r.received).toHaveLength(0);
      const second = await buildTestApp(dialect, restartEnv);
      try {
        await workerFor(second, [owner.user.workspace_id]).drain();
        expect(r.received).toHaveLength(1);
        const body = new StandardWebhook(hook.secret).verify(
          r.received[0]!.body,
          r.received[0]!.headers as Record<string, string>,
        );
        expect(body).toMatchObject({ type: 'grievance.created', data: { title: 'Water supply cut' } });
      } finally {
        await second.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}
