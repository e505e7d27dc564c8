/**
 * Which provider carries a channel (the contract's fourth part, "An office's first week"): the first active
 * account for a channel becomes its default; a workspace with accounts for a channel never falls back to the
 * deployment's provider (all switched off: 422 naming the account and the PATCH); GET /api/workspace says what
 * carries each channel and whether it is simulated; campaign items say so too, with their latest error.
 */
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { buildTestApp, call, dialects, expectError, register, type TestApp, uniquePhone } from './helpers.ts';
import { isolatedDatabase } from './messaging-helpers.ts';

for (const dialect of dialects) {
  describe(`what carries each channel (${dialect})`, () => {
    let t: TestApp;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      // MSG91 unreachable: a closed port on loopback.
      t = await buildTestApp(dialect, {
        ...database.env,
        MSG91_BASE_URL: 'http://127.0.0.1:9',
        DELIVERY_RETRY_SCHEDULE: '60',
      });
    });
    afterAll(async () => {
      await t?.close();
      await database?.drop();
    });

    const msg91 = (token: string, extra: Record<string, unknown> = {}) =>
      call(t.app, 'POST', '/api/channel-accounts', {
        token,
        body: {
          name: 'MSG91',
          provider: 'msg91',
          settings: { sender: 'CESOFC' },
          credentials: { authkey: 'msg91-authkey-0123456789' },
          ...extra,
        },
      });

    it('a fresh workspace: every channel through the sandbox, said to be simulated', async () => {
      const owner = await register(t.app);
      const ws = await call(t.app, 'GET', '/api/workspace', { token: owner.token });
      expect(ws.status, ws.raw).toBe(200);
      expect(ws.body.data.name).toBeTruthy();
      for (const channel of ['sms', 'whatsapp', 'email', 'ivr'])
        expect(ws.body.data.channels[channel]).toEqual({
          provider: 'sandbox',
          channel_account_id: null,
          simulated: true,
          active: true,
          templates_only: false,
        });
    });

    it('the first active account for a channel becomes its default, and carries it; switched off, nothing falls back', async () => {
      const owner = await register(t.app);
      const created = await msg91(owner.token);
      expect(created.status, created.raw).toBe(201);
      expect(created.body.data.default_for).toEqual(['sms']);
      const id = created.body.data.id as string;
      const ws = await call(t.app, 'GET', '/api/workspace', { token: owner.token });
      expect(ws.body.data.channels.sms).toEqual({
        provider: 'msg91',
        channel_account_id: id,
        simulated: false,
        active: true,
        templates_only: true,
      });
      // A second account for sms is not made the default.
      const second = await msg91(owner.token, { name: 'MSG91 backup' });
      expect(second.body.data.default_for).toEqual([]);
      for (const account of [id, second.body.data.id])
        await call(t.app, 'PATCH', `/api/channel-accounts/${account}`, {
          token: owner.token,
          body: { active: false },
        });
      const send = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: uniquePhone(), message: 'Hi' },
      });
      expectError(send, 422, 'validation_error');
      expect(Object.keys(send.body.details)).toEqual(['channel_account_id']);
      expect(send.body.details.channel_account_id[0]).toContain(
        `PATCH /api/channel-accounts/${id} {"active": true}`,
      );
      const broadcast = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Hi', recipients: [uniquePhone()] },
      });
      expectError(broadcast, 422, 'validation_error');
      const after = await call(t.app, 'GET', '/api/workspace', { token: owner.token });
      expect(after.body.data.channels.sms).toMatchObject({
        provider: 'msg91',
        active: false,
        simulated: false,
      });
      // Other channels are untouched: still the sandbox.
      expect(after.body.data.channels.email).toMatchObject({ provider: 'sandbox', simulated: true });
    });

    it("the default switched off stops its channel: nothing moves to the workspace's other account for it (fifth part)", async () => {
      // The Varanasi office: MSG91 is the SMS default, an Exotel account (sms and ivr) is there for IVR.
      const owner = await register(t.app);
      const primary = (await msg91(owner.token)).body.data.id as string;
      const exotel = await call(t.app, 'POST', '/api/channel-accounts', {
        token: owner.token,
        body: {
          name: 'Exotel IVR',
          provider: 'exotel',
          channels: ['sms', 'ivr'],
          settings: { sid: 'varanasi1', caller_id: '08047112233', app_id: '123456', sender: 'CESOFC' },
          credentials: { api_key: 'k', api_token: 't' },
        },
      });
      expect(exotel.status, exotel.raw).toBe(201);
      expect(exotel.body.data.default_for).toEqual(['ivr']);
      expect(exotel.body.data.templates_only).toBe(false);
      // MSG91's key is refused: the account is switched off (as auth_failed does), still the SMS default.
      await t.db.kysely
        .updateTable('channel_accounts')
        .set({ disabled_at: new Date().toISOString(), disabled_reason: 'credentials refused: code 207' })
        .where('id', '=', Number(primary.slice(4)))
        .execute();
      const send = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: uniquePhone(), message: 'Hi' },
      });
      expectError(send, 422, 'validation_error');
      expect(send.body.details.channel_account_id[0]).toContain(`default account ${primary}`);
      const broadcast = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Hi', recipients: [uniquePhone()] },
      });
      expectError(broadcast, 422, 'validation_error');
      expect(broadcast.body.details.channel_account_id[0]).toContain(primary);
      const ws = await call(t.app, 'GET', '/api/workspace', { token: owner.token });
      expect(ws.body.data.channels.sms).toMatchObject({ channel_account_id: primary, active: false });
      expect(ws.body.data.channels.ivr).toMatchObject({
        channel_account_id: exotel.body.data.id,
        active: true,
      });
      // The office switches it off by hand too: it stays the default, and the channel stays stopped.
      await call(t.app, 'PATCH', `/api/channel-accounts/${primary}`, {
        token: owner.token,
        body: { active: false },
      });
      const still = await call(t.app, 'GET', `/api/channel-accounts/${primary}`, { token: owner.token });
      expect(still.body.data.default_for).toEqual(['sms']);
      // The office chooses Exotel for SMS: then it carries it.
      await call(t.app, 'PATCH', `/api/channel-accounts/${exotel.body.data.id}`, {
        token: owner.token,
        body: { default_for: ['sms', 'ivr'] },
      });
      const moved = await call(t.app, 'GET', '/api/workspace', { token: owner.token });
      expect(moved.body.data.channels.sms).toMatchObject({
        channel_account_id: exotel.body.data.id,
        active: true,
      });
    });

    it('campaign items name their provider, say when it is simulated, and show the latest error of an outage', async () => {
      const owner = await register(t.app);
      const simulated = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: {
          channel: 'email',
          subject: 'Rally',
          message: 'Rally at 5',
          recipients: ['voter@example.org'],
        },
      });
      expect(simulated.status, simulated.raw).toBe(202);
      const item = await call(t.app, 'GET', `/api/campaigns/${simulated.body.data.campaign_id}`, {
        token: owner.token,
      });
      expect(item.body.data).toMatchObject({ provider: 'sandbox', simulated: true, last_error: null });

      const created = await msg91(owner.token);
      const template = await call(t.app, 'POST', '/api/templates', {
        token: owner.token,
        body: {
          name: 'Rally',
          channel: 'sms',
          body: 'Rally at 5. -CESOFC',
          provider_template_ids: { msg91: '64f0c2d1e4b0a1b2c3d4e5f6' },
        },
      });
      const campaign = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: {
          channel: 'sms',
          template_id: template.body.data.id,
          recipients: [uniquePhone(), uniquePhone()],
        },
      });
      expect(campaign.status, campaign.raw).toBe(202);
      const ref = campaign.body.data.campaign_id as string;
      await new DeliveryWorker({
        db: t.db,
        config: t.config,
        providers: t.providers,
        log: pino({ level: 'silent' }),
      }).drain();
      const outage = await call(t.app, 'GET', `/api/campaigns/${ref}`, { token: owner.token });
      expect(outage.body.data).toMatchObject({
        channel_account_id: created.body.data.id,
        provider: 'msg91',
        simulated: false,
        stats: { queued: 2 },
      });
      expect(outage.body.data.last_error).toMatchObject({ error_code: expect.any(String) });
      expect(outage.body.data.last_error.error_message).toMatch(/MSG91 could not be reached/);
    });
  });
}
