/**
 * A deployment whose APP_KEY changed (a lost app.key, a new secret in the environment) cannot open the channel
 * accounts' sealed credentials and tokens. Nothing answers 500 for it: the accounts are listed without callback
 * URLs, a send through one is a 409 that says what to do, the worker fails its messages with auth_failed and
 * switches it off, its old callback URLs are refused, and a PATCH that gives the credentials again brings it back.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

const KEY_A = Buffer.alloc(32, 1).toString('hex');
const KEY_B = Buffer.alloc(32, 2).toString('hex');
const TWILIO = {
  name: 'Twilio',
  provider: 'twilio',
  default_for: ['sms'],
  settings: { account_sid: `AC${'1'.repeat(32)}`, sms_from: '+15005550006' },
  credentials: { auth_token: 'first-auth-token-1234' },
};

for (const dialect of dialects) {
  describe(`channel accounts after APP_KEY changed (${dialect})`, () => {
    let dir: string;
    let before: TestApp;
    let after: TestApp;
    let owner: Account;
    let accountId: string;
    let oldUrl: string;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'ces-appkey-'));
      const shared: Record<string, string> =
        dialect === 'sqlite' ? { DATABASE_URL: `sqlite:${join(dir, 'shared.db')}` } : {};
      before = await buildTestApp(dialect, { ...shared, APP_KEY: KEY_A });
      after = await buildTestApp(dialect, { ...shared, APP_KEY: KEY_B });
      owner = await register(before.app);
      const created = await call(before.app, 'POST', '/api/channel-accounts', {
        token: owner.token,
        body: TWILIO,
      });
      expect(created.status).toBe(201);
      accountId = created.body.data.id;
      oldUrl = created.body.data.callback_urls.delivery;
    });
    afterAll(async () => {
      await before?.close();
      await after?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('lists the account without callback URLs, and reads it alone the same way', async () => {
      const list = await call(after.app, 'GET', '/api/channel-accounts', { token: owner.token });
      expect(list.status).toBe(200);
      const item = list.body.data.data.find((a: { id: string }) => a.id === accountId);
      expect(item).toMatchObject({ id: accountId, credentials_set: ['auth_token'], callback_urls: {} });
      const one = await call(after.app, 'GET', `/api/channel-accounts/${accountId}`, { token: owner.token });
      expect(one.status).toBe(200);
      expect(one.body.data.callback_urls).toEqual({});
    });

    it('refuses a send through it with a 409 that says what to do, and takes nothing', async () => {
      const credits = (await call(after.app, 'GET', '/api/user', { token: owner.token })).body.data.credits;
      const res = await call(after.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: uniquePhone(), message: 'Hello' },
      });
      expectError(res, 409, 'conflict');
      expect(res.body.message).toContain('APP_KEY');
      expect(res.body.message).toContain(`PATCH /api/channel-accounts/${accountId}`);
      // So do the account's own test send and a reply in a conversation, which go through it.
      const tested = await call(after.app, 'POST', `/api/channel-accounts/${accountId}/test`, {
        token: owner.token,
        body: { to: uniquePhone() },
      });
      expectError(tested, 409, 'conflict');
      const from = uniquePhone();
      await call(after.app, 'POST', '/api/inbound', {
        token: owner.token,
        body: { channel: 'sms', from, body: 'When is the meeting?' },
      });
      const conversation = (
        await call(after.app, 'GET', '/api/conversations', { token: owner.token })
      ).body.data.data.find((c: { address: string }) => c.address === from);
      expectError(
        await call(after.app, 'POST', `/api/conversations/${conversation.id as string}/reply`, {
          token: owner.token,
          body: { message: 'At 5, at the office.' },
        }),
        409,
        'conflict',
      );
      expect((await call(after.app, 'GET', '/api/user', { token: owner.token })).body.data.credits).toEqual(
        credits,
      );
    });

    it("refuses the account's old callback URLs", async () => {
      const path = new URL(oldUrl).pathname;
      const res = await after.app.inject({ method: 'POST', url: path, payload: { data: [] } });
      expect(res.statusCode).toBe(401);
      expect(res.json().error_code).toBe('unauthorized');
    });

    it('fails a broadcast queued through it with auth_failed, refunds it and switches the account off', async () => {
      const credits = (await call(after.app, 'GET', '/api/user', { token: owner.token })).body.data.credits;
      const sent = await call(after.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', recipients: [uniquePhone(), uniquePhone()], message: 'Meeting at 5' },
      });
      expect(sent.status, JSON.stringify(sent.body)).toBe(202);
      const worker = new DeliveryWorker({
        db: after.db,
        config: after.config,
        providers: after.providers,
        log: pino({ level: 'silent' }),
      });
      await worker.drain();
      const messages = await call(after.app, 'GET', `/api/campaigns/${sent.body.data.campaign_id}/messages`, {
        token: owner.token,
      });
      expect(
        messages.body.data.data.map((m: { status: string; error_code: string }) => m.error_code),
      ).toEqual(['auth_failed', 'auth_failed']);
      expect((await call(after.app, 'GET', '/api/user', { token: owner.token })).body.data.credits).toEqual(
        credits,
      );
      const account = await call(after.app, 'GET', `/api/channel-accounts/${accountId}`, {
        token: owner.token,
      });
      expect(account.body.data.active).toBe(false);
      expect(account.body.data.disabled_reason).toContain('APP_KEY');
    });

    it('comes back with new callback URLs once a PATCH gives the credentials again', async () => {
      const missing = await call(after.app, 'PATCH', `/api/channel-accounts/${accountId}`, {
        token: owner.token,
        body: { name: 'Twilio office' },
      });
      expectError(missing, 422, 'validation_error');
      expect(missing.body.details['credentials.auth_token']).toBeDefined();
      const fixed = await call(after.app, 'PATCH', `/api/channel-accounts/${accountId}`, {
        token: owner.token,
        body: { credentials: { auth_token: 'second-auth-token-5678' }, active: true },
      });
      expect(fixed.status).toBe(200);
      expect(fixed.body.data.callback_urls.delivery).toMatch(/^https?:\/\//);
      expect(fixed.body.data.callback_urls.delivery).not.toBe(oldUrl);
      expect(fixed.body.data.credentials_set).toEqual(['auth_token']);
      expect(fixed.body.data.active).toBe(true);
      const again = await call(after.app, 'GET', `/api/channel-accounts/${accountId}`, {
        token: owner.token,
      });
      expect(again.body.data.callback_urls).toEqual(fixed.body.data.callback_urls);
    });
  });
}
