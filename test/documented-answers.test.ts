/**
 * Answers the API document gives an operation that no other test reached (npm run status-coverage lists them):
 * each is produced here as a caller would meet it.
 */
import { describe, expect, it } from 'vitest';
import { IdempotencyService } from '../src/modules/idempotency/idempotency.service.ts';
import { ProviderError } from '../src/providers/provider.ts';
import { unsubscribeToken } from '../src/modules/opt-outs/unsubscribe.ts';
import { buildTestApp, call, dialects, expectError, register, type TestApp, uniquePhone } from './helpers.ts';

describe.each(dialects)('documented answers (%s)', (dialect) => {
  it('a custom field changed (200) and a survey that never ran deleted (200)', async () => {
    const t = await buildTestApp(dialect);
    try {
      const owner = await register(t.app);
      const created = await call(t.app, 'POST', '/api/voter-fields', {
        token: owner.token,
        body: { key: 'ration_card', label: 'Ration card', type: 'text' },
      });
      expect(created.status).toBe(201);
      const changed = await call(t.app, 'PATCH', '/api/voter-fields/ration_card', {
        token: owner.token,
        body: { label: 'Ration card number' },
      });
      expect(changed.status).toBe(200);
      expect(changed.body.data.label).toBe('Ration card number');

      const survey = await call(t.app, 'POST', '/api/surveys', {
        token: owner.token,
        body: {
          name: 'Ward opinion',
          questions: [
            {
              key: 'vote',
              type: 'choice',
              text: { en: 'Will you vote?' },
              choices: [
                { key: '1', label: { en: 'Yes' } },
                { key: '2', label: { en: 'No' } },
              ],
            },
          ],
        },
      });
      expect(survey.status, survey.raw).toBe(201);
      const removed = await call(t.app, 'DELETE', `/api/surveys/${survey.body.data.id}`, {
        token: owner.token,
      });
      expect(removed.status).toBe(200);
      expectError(
        await call(t.app, 'GET', `/api/surveys/${survey.body.data.id}`, { token: owner.token }),
        404,
        'not_found',
      );
    } finally {
      await t.close();
    }
  });

  it('a campaign for a segment that does not exist is 404', async () => {
    const t = await buildTestApp(dialect);
    try {
      const owner = await register(t.app);
      const res = await call(t.app, 'POST', '/api/campaigns', {
        token: owner.token,
        body: { name: 'Rally', channel: 'sms', message: 'Meet us at 6', segment_id: 999_999 },
      });
      expectError(res, 404, 'not_found');
    } finally {
      await t.close();
    }
  });

  it('a repeat of a payment or a broadcast while the first with its Idempotency-Key is still running is 409', async () => {
    const t = await buildTestApp(dialect);
    try {
      const owner = await register(t.app);
      const cases = [
        // The fingerprint names the route without its /api prefix (idempotency.routes.ts).
        { route: '/api/payments', body: { sms_credits: 1000 } },
        {
          route: '/api/messages/broadcast',
          body: { channel: 'sms', message: 'rally', recipients: [uniquePhone()] },
        },
      ];
      for (const { route, body } of cases) {
        const key = `in-flight-${route}`;
        // The first request has taken the key and not answered yet (it runs in another process).
        const now = new Date().toISOString();
        await t.db.kysely
          .insertInto('idempotency_keys')
          .values({
            workspace_id: owner.user.workspace_id,
            key,
            request_hash: IdempotencyService.fingerprint('POST', route.slice('/api'.length), body),
            status: 'in_flight',
            created_at: now,
            updated_at: now,
          })
          .execute();
        const res = await call(t.app, 'POST', route, {
          token: owner.token,
          body,
          headers: { 'idempotency-key': key },
        });
        expectError(res, 409, 'conflict');
      }
    } finally {
      await t.close();
    }
  });

  it("a disabled webhook's delivery is not retried (409)", async () => {
    const t = await buildTestApp(dialect, { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
    try {
      const owner = await register(t.app);
      const hook = await call(t.app, 'POST', '/api/webhooks', {
        token: owner.token,
        body: { url: 'http://127.0.0.1:9/hook', events: ['message.delivered'] },
      });
      expect(hook.status, hook.raw).toBe(201);
      const ping = await call(t.app, 'POST', `/api/webhooks/${hook.body.data.id}/test`, {
        token: owner.token,
      });
      expect(ping.status, ping.raw).toBe(202);
      const off = await call(t.app, 'PATCH', `/api/webhooks/${hook.body.data.id}`, {
        token: owner.token,
        body: { active: false },
      });
      expect(off.status).toBe(200);
      const retry = await call(
        t.app,
        'POST',
        `/api/webhooks/${hook.body.data.id}/deliveries/${ping.body.data.delivery_id}/retry`,
        { token: owner.token },
      );
      expectError(retry, 409, 'conflict');
    } finally {
      await t.close();
    }
  });

  it('a reply the provider refuses is 502; a reply and a test send with too few credits are 402', async () => {
    const t = await buildTestApp(dialect);
    try {
      const owner = await register(t.app);
      const from = uniquePhone();
      await call(t.app, 'POST', '/api/inbound', {
        token: owner.token,
        body: { channel: 'sms', from, body: 'The drain is blocked' },
      });
      const conversation = (
        await call(t.app, 'GET', '/api/conversations', { token: owner.token })
      ).body.data.data.find((c: { address: string }) => c.address === from);
      const reply = () =>
        call(t.app, 'POST', `/api/conversations/${conversation.id as string}/reply`, {
          token: owner.token,
          body: { message: 'We have told the ward office.' },
        });
      // Through the deployment's provider (the workspace has no account of its own yet).
      const sms = t.providers.sms;
      const send = sms.send.bind(sms);
      sms.send = () =>
        Promise.reject(new ProviderError('the gateway refused: invalid number', false, 'invalid_recipient'));
      try {
        expectError(await reply(), 502, 'provider_error');
      } finally {
        sms.send = send;
      }
      const account = await call(t.app, 'POST', '/api/channel-accounts', {
        token: owner.token,
        body: { name: 'Test gateway', provider: 'sandbox', channels: ['sms'] },
      });
      expect(account.status, account.raw).toBe(201);

      await setSmsBalance(t, owner.user.workspace_id, 0);
      expectError(await reply(), 402, 'insufficient_credits');
      expectError(
        await call(t.app, 'POST', `/api/channel-accounts/${account.body.data.id as string}/test`, {
          token: owner.token,
          body: { to: uniquePhone() },
        }),
        402,
        'insufficient_credits',
      );
    } finally {
      await t.close();
    }
  });

  it("an email's one-click unsubscribe link, posted, opts the address out (200)", async () => {
    const t = await buildTestApp(dialect);
    try {
      const owner = await register(t.app);
      const email = `voter-${Date.now()}@example.com`;
      const token = unsubscribeToken(t.config.appKey, owner.user.workspace_id, email);
      const res = await call(t.app, 'POST', `/api/unsubscribe/${token}`, {
        body: 'List-Unsubscribe=One-Click',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expect(res.status, res.raw).toBe(200);
      const optOuts = await call(t.app, 'GET', `/api/opt-outs?address=${encodeURIComponent(email)}`, {
        token: owner.token,
      });
      expect(optOuts.body.data.data.map((o: { address: string }) => o.address)).toContain(email);
    } finally {
      await t.close();
    }
  });
});

async function setSmsBalance(t: TestApp, workspaceId: number, balance: number) {
  await t.db.kysely
    .updateTable('credit_balances')
    .set({ balance })
    .where('workspace_id', '=', workspaceId)
    .where('channel', '=', 'sms')
    .execute();
}
