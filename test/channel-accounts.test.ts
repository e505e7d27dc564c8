import { createHmac, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import {
  addMember,
  call,
  dialects,
  expectError,
  redisUrl,
  register,
  uniquePhone,
  type Account,
} from './helpers.ts';
import { buildProviderTestApp, isolatedDatabase, until } from './messaging-helpers.ts';
import {
  EXOTEL,
  fakeExotel,
  fakeMeta,
  fakeMsg91,
  fakeTwilio,
  META,
  MSG91_AUTHKEY,
  TWILIO,
  type Double,
} from './provider-doubles.ts';

const PUBLIC = 'https://ces.example.org';
const VERSION = 'v23.0';
const SECRETS = [
  MSG91_AUTHKEY,
  EXOTEL.apiKey,
  EXOTEL.apiToken,
  META.accessToken,
  META.appSecret,
  'wrong-authkey-7',
];

const pathOf = (url: string) => new URL(url).pathname + new URL(url).search;
const noPlus = (phone: string) => phone.slice(1);
const metaSign = (raw: string, secret = META.appSecret) =>
  `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`;

for (const dialect of dialects) {
  describe(`channel accounts and the providers Indian offices use (${dialect})`, () => {
    let msg91: Double;
    let exotel: Double;
    let meta: Double;
    let twilio: Double;
    let t: Awaited<ReturnType<typeof buildProviderTestApp>>;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    let worker: DeliveryWorker;
    const lines: string[] = [];
    const answers: string[] = [];
    const owners: Account[] = [];

    beforeAll(async () => {
      [msg91, exotel, meta, twilio] = await Promise.all([
        fakeMsg91(),
        fakeExotel(),
        fakeMeta(VERSION),
        fakeTwilio(),
      ]);
      database = await isolatedDatabase(dialect);
      const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(line) });
      t = await buildProviderTestApp(
        dialect,
        {
          ...database.env,
          PUBLIC_BASE_URL: PUBLIC,
          MSG91_BASE_URL: msg91.url,
          EXOTEL_BASE_URL: exotel.url,
          WHATSAPP_CLOUD_BASE_URL: meta.url,
          WHATSAPP_CLOUD_API_VERSION: VERSION,
          TWILIO_BASE_URL: twilio.url,
          DELIVERY_RETRY_SCHEDULE: '0,0',
          WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
        },
        logger,
      );
      worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: logger });
    }, 60_000);
    afterAll(async () => {
      await t?.close();
      await database?.drop();
      await Promise.all([msg91?.close(), exotel?.close(), meta?.close(), twilio?.close()]);
    });

    /** Every call goes through here, so the last test can look for secrets in every answer. */
    const api = async (...args: Parameters<typeof call>) => {
      const res = await call(...args);
      answers.push(res.raw);
      return res;
    };
    const owner = async () => {
      const account = await register(t.app);
      owners.push(account);
      return account;
    };
    const createAccount = (token: string, body: Record<string, unknown>) =>
      api(t.app, 'POST', '/api/channel-accounts', { token, body });
    const message = async (token: string, id: string) =>
      (await api(t.app, 'GET', `/api/messages/${id}`, { token })).body.data;
    const voter = (token: string, body: Record<string, unknown>) =>
      api(t.app, 'POST', '/api/voters', { token, body });
    const template = async (token: string, body: Record<string, unknown>) =>
      (await api(t.app, 'POST', '/api/templates', { token, body })).body.data.id as string;
    const post = (url: string, body: string, type: string, headers: Record<string, string> = {}) =>
      api(t.app, 'POST', pathOf(url), { body, headers: { 'content-type': type, ...headers } });

    it('keeps credentials written only and sealed, checks each field, moves the one default, audits without secrets', async () => {
      const o = await owner();
      const missing = await createAccount(o.token, {
        name: 'MSG91',
        provider: 'msg91',
        settings: { sender: 'CESOFC' },
      });
      expectError(missing, 422, 'validation_error');
      expect(missing.body.details['credentials.authkey']).toEqual(['is required on a msg91 account.']);
      const foreign = await createAccount(o.token, {
        name: 'MSG91',
        provider: 'msg91',
        channels: ['whatsapp'],
        settings: { sender: 'CESOFC', region: 'in' },
        credentials: { authkey: MSG91_AUTHKEY },
      });
      expectError(foreign, 422, 'validation_error');
      expect(Object.keys(foreign.body.details).sort()).toEqual(['channels', 'settings.region']);
      const ivr = await createAccount(o.token, {
        name: 'Exotel',
        provider: 'exotel',
        channels: ['ivr'],
        settings: { sid: EXOTEL.sid, sender: 'CESOFC' },
        credentials: { api_key: EXOTEL.apiKey, api_token: EXOTEL.apiToken },
      });
      expect(Object.keys(ivr.body.details).sort()).toEqual(['settings.app_id', 'settings.caller_id']);

      const created = await createAccount(o.token, {
        name: 'Office MSG91',
        provider: 'msg91',
        settings: { sender: 'CESOFC' },
        credentials: { authkey: MSG91_AUTHKEY },
        default_for: ['sms'],
        send_rate_per_second: 50,
      });
      expect(created.status).toBe(201);
      const account = created.body.data;
      expect(account).toMatchObject({
        name: 'Office MSG91',
        provider: 'msg91',
        channels: ['sms'],
        settings: { sender: 'CESOFC' },
        credentials_set: ['authkey'],
        default_for: ['sms'],
        send_rate_per_second: 50,
        active: true,
      });
      expect(account.credentials).toBeUndefined();
      expect(account.callback_urls.delivery).toMatch(
        new RegExp(`^${PUBLIC}/api/providers/msg91/${account.id}/[A-Za-z0-9_-]{32}/delivery$`),
      );
      const stored = await t.db.kysely
        .selectFrom('channel_accounts')
        .selectAll()
        .where('id', '=', Number(account.id.slice(4)))
        .executeTakeFirstOrThrow();
      expect(stored.credentials).toMatch(/^v1\./);
      expect(JSON.stringify(stored)).not.toContain(MSG91_AUTHKEY);

      // A second default for SMS takes it from the first.
      const sandbox = await createAccount(o.token, {
        name: 'Sandbox',
        provider: 'sandbox',
        default_for: ['sms', 'email'],
      });
      expect(sandbox.body.data.channels).toEqual(['sms', 'whatsapp', 'email', 'ivr']);
      expect(
        (await api(t.app, 'GET', `/api/channel-accounts/${account.id}`, { token: o.token })).body.data
          .default_for,
      ).toEqual([]);
      const list = await api(t.app, 'GET', '/api/channel-accounts', { token: o.token });
      expect(list.body.data.data.map((a: { id: string }) => a.id)).toEqual([
        account.id,
        sandbox.body.data.id,
      ]);

      // Politicians only; another workspace sees nothing.
      const manager = await addMember(t.app, o, 'manager');
      expectError(
        await api(t.app, 'GET', '/api/channel-accounts', { token: manager.token }),
        403,
        'forbidden',
      );
      const stranger = await owner();
      expectError(
        await api(t.app, 'GET', `/api/channel-accounts/${account.id}`, { token: stranger.token }),
        404,
        'not_found',
      );

      // A new token: the old URL stops working. New credentials are set, not shown.
      const rotated = await api(t.app, 'PATCH', `/api/channel-accounts/${account.id}`, {
        token: o.token,
        body: {
          rotate_callback_token: true,
          credentials: { authkey: `${MSG91_AUTHKEY}-2` },
          default_for: ['sms'],
        },
      });
      expect(rotated.status).toBe(200);
      expect(rotated.body.data.callback_urls.delivery).not.toBe(account.callback_urls.delivery);
      expect(rotated.body.data.default_for).toEqual(['sms']);
      const old = await post(
        account.callback_urls.delivery,
        JSON.stringify({ requestId: 'x', number: '919800000000', status: '1' }),
        'application/json',
      );
      expectError(old, 401, 'unauthorized');
      expectError(
        await api(t.app, 'PATCH', `/api/channel-accounts/${account.id}`, {
          token: o.token,
          body: { settings: { sender: '' } },
        }),
        422,
        'validation_error',
      );

      expect(
        (await api(t.app, 'DELETE', `/api/channel-accounts/${account.id}`, { token: o.token })).status,
      ).toBe(200);
      expectError(
        await api(t.app, 'GET', `/api/channel-accounts/${account.id}`, { token: o.token }),
        404,
        'not_found',
      );
      const audit = await api(t.app, 'GET', '/api/audit-log?per_page=100', { token: o.token });
      const actions = audit.body.data.data.map((e: { action: string }) => e.action);
      expect(actions).toEqual(
        expect.arrayContaining([
          'channel_account.created',
          'channel_account.updated',
          'channel_account.deleted',
        ]),
      );
      expect(audit.raw).not.toContain(MSG91_AUTHKEY);
      expect(
        audit.body.data.data.find((e: { action: string }) => e.action === 'channel_account.updated').details,
      ).toMatchObject({
        credentials_changed: ['authkey'],
      });
    });

    it('MSG91: a campaign goes out as one Flow request per template; both report forms settle it; forged or late reports change nothing', async () => {
      const o = await owner();
      const [asha, ravi, guest] = [uniquePhone(), uniquePhone(), uniquePhone()];
      await voter(o.token, { name: 'Asha Devi', phone: asha, constituency: 'Varanasi', ward: '12' });
      await voter(o.token, { name: 'Ravi Kumar', phone: ravi, constituency: 'Varanasi', ward: '7' });
      const account = (
        await createAccount(o.token, {
          name: 'MSG91',
          provider: 'msg91',
          settings: { sender: 'CESOFC' },
          credentials: { authkey: MSG91_AUTHKEY },
          default_for: ['sms'],
        })
      ).body.data;
      // MSG91 sends templates only.
      const text = await api(t.app, 'POST', '/api/messages/broadcast', {
        token: o.token,
        body: { channel: 'sms', message: 'Hello', recipients: [asha] },
      });
      expectError(text, 422, 'validation_error');
      expect(Object.keys(text.body.details)).toEqual(['template_id']);
      const tpl = await template(o.token, {
        name: 'Ward meeting',
        channel: 'sms',
        body: 'Namaste {{first_name}}, ward {{ward}} meets at 5. -CESOFC',
        dlt_template_id: '1107161234567890123',
        sender_id: 'CESOFC',
        provider_template_ids: { msg91: '64f0c2d1e4b0a1b2c3d4e5f6' },
      });
      const res = await api(t.app, 'POST', '/api/messages/broadcast', {
        token: o.token,
        body: { channel: 'sms', template_id: tpl, recipients: [asha, ravi, guest] },
      });
      expect(res.status).toBe(202);
      const before = msg91.requests.length;
      await worker.drain();
      const sent = msg91.requests.slice(before);
      expect(sent).toHaveLength(1);
      expect(sent[0]!.headers.authkey).toBe(MSG91_AUTHKEY);
      const body = sent[0]!.json as {
        template_id: string;
        short_url: string;
        recipients: Array<Record<string, string>>;
      };
      expect(body.template_id).toBe('64f0c2d1e4b0a1b2c3d4e5f6');
      expect(body.short_url).toBe('0');
      expect(body.recipients).toEqual(
        expect.arrayContaining([
          { mobiles: noPlus(asha), first_name: 'Asha', ward: '12' },
          { mobiles: noPlus(ravi), first_name: 'Ravi', ward: '7' },
          { mobiles: noPlus(guest), first_name: '', ward: '' },
        ]),
      );
      const history = await api(
        t.app,
        'GET',
        `/api/messages/history?campaign_id=${res.body.data.campaign_id}`,
        { token: o.token },
      );
      const byTo = new Map(history.body.data.data.map((m: { to: string; id: string }) => [m.to, m]));
      const requestId = (history.body.data.data[0] as { provider_message_id: string }).provider_message_id;
      expect(history.body.data.data).toHaveLength(3);
      for (const m of history.body.data.data)
        expect(m).toMatchObject({
          status: 'sent',
          provider: 'msg91',
          channel_account_id: account.id,
          provider_message_id: requestId,
        });
      const idOf = (to: string) => (byTo.get(to) as { id: string }).id;

      // A wrong token changes nothing.
      const forged = account.callback_urls.delivery.replace(
        /\/[A-Za-z0-9_-]{32}\/delivery$/,
        `/${'A'.repeat(32)}/delivery`,
      );
      expectError(
        await post(
          forged,
          JSON.stringify({ requestId, number: noPlus(asha), status: '1' }),
          'application/json',
        ),
        401,
        'unauthorized',
      );
      expect((await message(o.token, idOf(asha))).status).toBe('sent');

      // MSG91's form: `data` holding a JSON array of { requestId, report: [...] }.
      const data = JSON.stringify([
        {
          requestId,
          userId: '123456',
          senderId: 'CESOFC',
          report: [
            { date: '2026-11-25 18:01:02', number: noPlus(asha), status: '1', desc: 'DELIVERED' },
            { date: '2026-11-25 18:01:02', number: noPlus(ravi), status: '9', desc: 'NDNC' },
          ],
        },
      ]);
      const form = await post(
        account.callback_urls.delivery,
        new URLSearchParams({ data }).toString(),
        'application/x-www-form-urlencoded',
      );
      expect(form.status).toBe(200);
      expect(form.body.data.applied).toBe(2);
      expect(await message(o.token, idOf(asha))).toMatchObject({ status: 'delivered' });
      expect(await message(o.token, idOf(ravi))).toMatchObject({ status: 'failed', error_code: 'dnd' });
      expect((await message(o.token, idOf(ravi))).error_message).toContain('MSG91 status 9');
      // JSON, one object: status 16 naming DLT.
      await post(
        account.callback_urls.delivery,
        JSON.stringify({
          requestId,
          number: noPlus(guest),
          status: '16',
          desc: 'Rejected: DLT template mismatch',
        }),
        'application/json',
      );
      expect(await message(o.token, idOf(guest))).toMatchObject({
        status: 'failed',
        error_code: 'dlt_rejected',
      });
      // Late and repeated reports never move a message back.
      await post(
        account.callback_urls.delivery,
        JSON.stringify([{ requestId, number: noPlus(asha), status: '2', desc: 'FAILED' }]),
        'application/json',
      );
      await post(
        account.callback_urls.delivery,
        new URLSearchParams({ data }).toString(),
        'application/x-www-form-urlencoded',
      );
      expect(await message(o.token, idOf(asha))).toMatchObject({ status: 'delivered' });
      expect(await message(o.token, idOf(ravi))).toMatchObject({ status: 'failed', error_code: 'dnd' });
      // Another account's report for these messages (its own valid URL) touches nothing of this one.
      const other = (
        await createAccount((await owner()).token, {
          name: 'Other',
          provider: 'msg91',
          settings: { sender: 'OTHERS' },
          credentials: { authkey: MSG91_AUTHKEY },
        })
      ).body.data;
      const stray = await post(
        other.callback_urls.delivery,
        JSON.stringify({ requestId, number: noPlus(guest), status: '1' }),
        'application/json',
      );
      expect(stray.body.data.applied).toBe(0);
      expect(await message(o.token, idOf(guest))).toMatchObject({ status: 'failed' });
    });

    it('a test send answers the provider id; refused credentials fail the message, switch the account off and tell webhooks', async () => {
      const o = await owner();
      const hook = await api(t.app, 'POST', '/api/webhooks', {
        token: o.token,
        body: { url: 'http://127.0.0.1:9/hook', events: ['channel_account.failed'] },
      });
      expect(hook.status, hook.raw).toBe(201);
      const tpl = await template(o.token, {
        name: 'Test',
        channel: 'sms',
        body: 'Test from {{name}}',
        provider_template_ids: { msg91: 'tpl-test-1' },
      });
      const good = (
        await createAccount(o.token, {
          name: 'Good',
          provider: 'msg91',
          settings: { sender: 'CESOFC' },
          credentials: { authkey: MSG91_AUTHKEY },
        })
      ).body.data;
      const to = uniquePhone();
      expectError(
        await api(t.app, 'POST', `/api/channel-accounts/${good.id}/test`, { token: o.token, body: { to } }),
        422,
        'validation_error',
      );
      const tested = await api(t.app, 'POST', `/api/channel-accounts/${good.id}/test`, {
        token: o.token,
        body: { to, template_id: tpl },
      });
      expect(tested.status).toBe(200);
      const last = msg91.requests.at(-1)!;
      expect(tested.body.data).toMatchObject({ channel: 'sms', to, provider: 'msg91' });
      expect(tested.body.data.provider_message_id).toMatch(/^3763646c/);
      expect((last.json as { recipients: Array<{ mobiles: string }> }).recipients[0]!.mobiles).toBe(
        noPlus(to),
      );

      const bad = (
        await createAccount(o.token, {
          name: 'Bad',
          provider: 'msg91',
          settings: { sender: 'CESOFC' },
          credentials: { authkey: 'wrong-authkey-7' },
          default_for: ['sms'],
        })
      ).body.data;
      const refused = await api(t.app, 'POST', `/api/channel-accounts/${bad.id}/test`, {
        token: o.token,
        body: { to, template_id: tpl },
      });
      expectError(refused, 422, 'provider_rejected');
      expect(refused.body.details).toMatchObject({ error_code: 'auth_failed', provider: 'msg91' });
      expect(refused.body.details.error_message).toContain('code 207');
      const after = (await api(t.app, 'GET', `/api/channel-accounts/${bad.id}`, { token: o.token })).body
        .data;
      expect(after).toMatchObject({ active: false, default_for: ['sms'] });
      expect(after.disabled_reason).toContain('Authentication failure');
      const failed = await message(o.token, refused.body.details.id);
      expect(failed).toMatchObject({
        status: 'failed',
        error_code: 'auth_failed',
        channel_account_id: bad.id,
      });
      const events = await t.db.kysely
        .selectFrom('webhook_events')
        .selectAll()
        .where('workspace_id', '=', o.user.workspace_id)
        .where('type', '=', 'channel_account.failed')
        .execute();
      expect(events).toHaveLength(1);
      expect(JSON.parse(events[0]!.payload)).toMatchObject({
        id: bad.id,
        provider: 'msg91',
        error_code: 'auth_failed',
      });
      // A switched-off account is refused by name; without a name nothing moves (the fifth part): not to the
      // deployment's provider, nor to the workspace's other active SMS account. The 422 names the default.
      const named = await api(t.app, 'POST', '/api/messages/send', {
        token: o.token,
        body: { channel: 'sms', to, template_id: tpl, channel_account_id: bad.id },
      });
      expectError(named, 422, 'validation_error');
      expect(Object.keys(named.body.details)).toEqual(['channel_account_id']);
      const noFallback = await api(t.app, 'POST', '/api/messages/send', {
        token: o.token,
        body: { channel: 'sms', to, message: 'Hi' },
      });
      expectError(noFallback, 422, 'validation_error');
      expect(noFallback.body.details.channel_account_id[0]).toContain(`default account ${bad.id}`);
      expect(noFallback.body.details.channel_account_id[0]).toContain('switched off');
      // Switched back on (credentials fixed) it carries messages again.
      await api(t.app, 'PATCH', `/api/channel-accounts/${bad.id}`, {
        token: o.token,
        body: { active: true, credentials: { authkey: MSG91_AUTHKEY } },
      });
      const again = await api(t.app, 'POST', '/api/messages/send', {
        token: o.token,
        body: { channel: 'sms', to, template_id: tpl },
      });
      expect(again.body.data).toMatchObject({
        provider: 'msg91',
        channel_account_id: bad.id,
        status: 'sent',
      });
    });

    it('Exotel: SMS with the DLT ids, IVR through the office flow that reads the greeting; status callbacks settle them', async () => {
      const o = await owner();
      const account = (
        await createAccount(o.token, {
          name: 'Exotel',
          provider: 'exotel',
          settings: {
            sid: EXOTEL.sid,
            sender: 'CESOFC',
            caller_id: '08047112345',
            app_id: '512345',
            dlt_entity_id: '1101234567890123456',
          },
          credentials: { api_key: EXOTEL.apiKey, api_token: EXOTEL.apiToken },
          default_for: ['sms', 'ivr'],
        })
      ).body.data;
      expect(account.channels).toEqual(['sms', 'ivr']);
      expect(Object.keys(account.callback_urls).sort()).toEqual([
        'call_status',
        'delivery',
        'greeting',
        'inbound',
        'missed_call',
        'survey_answer',
        'survey_gather',
      ]);
      const tpl = await template(o.token, {
        name: 'Reminder',
        channel: 'sms',
        body: 'Vote on Friday {{name}}. -CESOFC',
        dlt_template_id: '1107161234567890999',
        sender_id: 'CESOFC',
      });
      const [a, b, c] = [uniquePhone(), uniquePhone(), uniquePhone()];
      await voter(o.token, { name: 'Meena', phone: a });
      const sends: string[] = [];
      for (const to of [a, b, c]) {
        const res = await api(t.app, 'POST', '/api/messages/send', {
          token: o.token,
          body: { channel: 'sms', to, template_id: tpl },
        });
        expect(res.status).toBe(201);
        expect(res.body.data).toMatchObject({ provider: 'exotel', channel_account_id: account.id });
        sends.push(res.body.data.id);
      }
      const sms = exotel.requests.find((r) => r.form.To === a)!;
      expect(sms.path).toBe(`/v1/Accounts/${EXOTEL.sid}/Sms/send.json`);
      expect(sms.form).toEqual({
        From: 'CESOFC',
        To: a,
        Body: 'Vote on Friday Meena. -CESOFC',
        DltEntityId: '1101234567890123456',
        DltTemplateId: '1107161234567890999',
        StatusCallback: account.callback_urls.delivery,
        CustomField: sends[0],
      });
      const sid = async (id: string) => (await message(o.token, id)).provider_message_id as string;
      const report = async (id: string, fields: Record<string, string>) =>
        post(
          account.callback_urls.delivery,
          new URLSearchParams({ SmsSid: await sid(id), ...fields }).toString(),
          'application/x-www-form-urlencoded',
        );
      expect(
        (
          await report(sends[0]!, {
            To: a,
            Status: 'sent',
            DetailedStatus: 'DELIVERED_TO_HANDSET',
            DetailedStatusCode: '20005',
          })
        ).body.data.applied,
      ).toBe(1);
      await report(sends[1]!, {
        To: b,
        Status: 'failed',
        DetailedStatus: 'TEMPLATE_MISMATCH',
        DetailedStatusCode: '23081',
      });
      await report(sends[2]!, {
        To: c,
        Status: 'failed_dnd',
        DetailedStatus: 'DND',
        DetailedStatusCode: '23001',
      });
      expect(await message(o.token, sends[0]!)).toMatchObject({ status: 'delivered' });
      expect(await message(o.token, sends[1]!)).toMatchObject({
        status: 'failed',
        error_code: 'dlt_rejected',
      });
      expect(await message(o.token, sends[2]!)).toMatchObject({ status: 'failed', error_code: 'dnd' });
      await report(sends[0]!, { To: a, Status: 'failed', DetailedStatusCode: '23081' });
      expect(await message(o.token, sends[0]!)).toMatchObject({ status: 'delivered' });

      // A campaign through the account: the worker sends each, and the reports settle the campaign.
      const audience = [uniquePhone(), uniquePhone()];
      const campaign = await api(t.app, 'POST', '/api/messages/broadcast', {
        token: o.token,
        body: { channel: 'sms', template_id: tpl, recipients: audience },
      });
      expect(campaign.status).toBe(202);
      await worker.drain();
      const items = (
        await api(t.app, 'GET', `/api/messages/history?campaign_id=${campaign.body.data.campaign_id}`, {
          token: o.token,
        })
      ).body.data.data as Array<{ id: string; to: string; provider: string; channel_account_id: string }>;
      expect(items.map((m) => [m.provider, m.channel_account_id])).toEqual([
        ['exotel', account.id],
        ['exotel', account.id],
      ]);
      for (const m of items) {
        expect(exotel.requests.find((r) => r.form.To === m.to)?.form.CustomField).toBe(m.id);
        await report(m.id, { To: m.to, Status: 'sent' });
      }
      await worker.drain();
      expect(
        (await api(t.app, 'GET', `/api/campaigns/${campaign.body.data.campaign_id}`, { token: o.token })).body
          .data,
      ).toMatchObject({ status: 'completed', stats: { delivered: 2, failed: 0 } });

      // Insufficient balance is a refusal, not refused credentials: the account stays on.
      const broke = await api(t.app, 'POST', '/api/messages/send', {
        token: o.token,
        body: { channel: 'sms', to: '+919812344030', template_id: tpl },
      });
      expectError(broke, 502, 'provider_error');
      expect(await message(o.token, broke.body.details.id)).toMatchObject({
        error_code: 'provider_rejected',
      });
      expect(
        (await api(t.app, 'GET', `/api/channel-accounts/${account.id}`, { token: o.token })).body.data.active,
      ).toBe(true);

      // IVR: a call connected to the office's flow; its Greeting applet reads the text from us.
      const listener = uniquePhone();
      const call1 = await api(t.app, 'POST', '/api/messages/send', {
        token: o.token,
        body: { channel: 'ivr', to: listener, message: 'Polling is on Friday, 7 am to 6 pm.' },
      });
      expect(call1.status).toBe(201);
      const connect = exotel.requests.find((r) => r.form.From === listener)!;
      expect(connect.path).toBe(`/v1/Accounts/${EXOTEL.sid}/Calls/connect.json`);
      expect(connect.form).toEqual({
        From: listener,
        CallerId: '08047112345',
        Url: `http://my.exotel.com/${EXOTEL.sid}/exoml/start_voice/512345`,
        CustomField: call1.body.data.id,
        StatusCallback: account.callback_urls.call_status,
        'StatusCallbackEvents[0]': 'terminal',
      });
      const callSid = await sid(call1.body.data.id);
      const greeting = (query: Record<string, string>) =>
        api(t.app, 'GET', `${pathOf(account.callback_urls.greeting)}?${new URLSearchParams(query)}`);
      const spoken = await greeting({
        CallSid: callSid,
        CustomField: call1.body.data.id,
        CallFrom: listener,
        Direction: 'outbound-api',
      });
      expect(spoken.status).toBe(200);
      expect(spoken.headers['content-type']).toMatch(/^text\/plain/);
      expect(spoken.raw).toBe('Polling is on Friday, 7 am to 6 pm.');
      expectError(await greeting({ CallSid: 'nope', CustomField: sends[0]! }), 404, 'not_found');
      const status = await post(
        account.callback_urls.call_status,
        new URLSearchParams({
          CallSid: callSid,
          Status: 'completed',
          CustomField: call1.body.data.id,
        }).toString(),
        'application/x-www-form-urlencoded',
      );
      expect(status.body.data.applied).toBe(1);
      expect(await message(o.token, call1.body.data.id)).toMatchObject({ status: 'delivered' });
    });

    it('WhatsApp Cloud API: text and approved templates; the signed webhook brings statuses and replies (STOP), verified', async () => {
      const o = await owner();
      const account = (
        await createAccount(o.token, {
          name: 'WhatsApp',
          provider: 'whatsapp_cloud',
          settings: { phone_number_id: META.phoneNumberId, waba_id: '102290129340398' },
          credentials: { access_token: META.accessToken, app_secret: META.appSecret },
          default_for: ['whatsapp'],
        })
      ).body.data;
      expect(account.verify_token).toMatch(/^[A-Za-z0-9_-]{32}$/);
      const webhook = account.callback_urls.webhook as string;
      const verify = (token: string) =>
        api(
          t.app,
          'GET',
          `${pathOf(webhook)}?${new URLSearchParams({ 'hub.mode': 'subscribe', 'hub.verify_token': token, 'hub.challenge': '1158201444' })}`,
        );
      const verified = await verify(account.verify_token);
      expect(verified.status).toBe(200);
      expect(verified.raw).toBe('1158201444');
      expectError(await verify('wrong'), 401, 'unauthorized');

      const asha = uniquePhone();
      await voter(o.token, { name: 'Asha Devi', phone: asha, constituency: 'Varanasi' });
      const text = await api(t.app, 'POST', '/api/messages/send', {
        token: o.token,
        body: { channel: 'whatsapp', to: asha, message: 'Rally at 5' },
      });
      expect(text.status).toBe(201);
      expect(meta.requests.at(-1)!.json).toEqual({
        messaging_product: 'whatsapp',
        recipient_type: 'individual',
        to: noPlus(asha),
        type: 'text',
        text: { body: 'Rally at 5' },
      });
      expect(meta.requests.at(-1)!.headers.authorization).toBe(`Bearer ${META.accessToken}`);
      const tpl = await template(o.token, {
        name: 'Rally invite',
        channel: 'whatsapp',
        language: 'hi',
        category: 'promotional',
        body: 'Namaste {{name}}, the rally in {{constituency}} starts at 5.',
        provider_template_ids: { whatsapp_cloud: 'rally_invite' },
      });
      const templated = await api(t.app, 'POST', '/api/messages/broadcast', {
        token: o.token,
        body: { channel: 'whatsapp', template_id: tpl, recipients: [asha] },
      });
      expect(templated.status).toBe(202);
      await worker.drain();
      expect(meta.requests.at(-1)!.json).toEqual({
        messaging_product: 'whatsapp',
        recipient_type: 'individual',
        to: noPlus(asha),
        type: 'template',
        template: {
          name: 'rally_invite',
          language: { code: 'hi' },
          components: [
            {
              type: 'body',
              parameters: [
                { type: 'text', text: 'Asha Devi' },
                { type: 'text', text: 'Varanasi' },
              ],
            },
          ],
        },
      });
      const outside = await api(t.app, 'POST', '/api/messages/send', {
        token: o.token,
        body: { channel: 'whatsapp', to: '+919812344700', message: 'Hi' },
      });
      expectError(outside, 502, 'provider_error');
      expect(await message(o.token, outside.body.details.id)).toMatchObject({
        status: 'failed',
        error_code: 'outside_session',
      });

      const wamid = (await message(o.token, text.body.data.id)).provider_message_id as string;
      const notify = (value: Record<string, unknown>, sign = metaSign) => {
        const raw = JSON.stringify({
          object: 'whatsapp_business_account',
          entry: [
            {
              id: '102290129340398',
              changes: [
                {
                  field: 'messages',
                  value: {
                    messaging_product: 'whatsapp',
                    metadata: { display_phone_number: '15550001234', phone_number_id: META.phoneNumberId },
                    ...value,
                  },
                },
              ],
            },
          ],
        });
        return post(webhook, raw, 'application/json', { 'x-hub-signature-256': sign(raw) });
      };
      const delivered = {
        statuses: [{ id: wamid, status: 'delivered', timestamp: '1764093000', recipient_id: noPlus(asha) }],
      };
      expectError(await notify(delivered, (raw) => metaSign(raw, 'not-the-secret')), 401, 'unauthorized');
      expectError(await notify(delivered, () => 'sha256=00'), 401, 'unauthorized');
      expect((await message(o.token, text.body.data.id)).status).toBe('sent');
      expect((await notify(delivered)).body.data.applied).toBe(1);
      expect(await message(o.token, text.body.data.id)).toMatchObject({ status: 'delivered' });
      await notify({
        statuses: [
          { id: wamid, status: 'failed', errors: [{ code: 131026, title: 'Message undeliverable' }] },
        ],
      });
      expect(await message(o.token, text.body.data.id)).toMatchObject({ status: 'delivered' });

      // A reply: kept, and STOP opts the sender out of WhatsApp; the same message again changes nothing.
      const reply = {
        contacts: [{ profile: { name: 'Asha' }, wa_id: noPlus(asha) }],
        messages: [
          {
            from: noPlus(asha),
            id: 'wamid.HBgMOTE5ODEyMzQ1Njc4FQIAEhgUM0',
            timestamp: '1764093100',
            type: 'text',
            text: { body: 'STOP' },
          },
        ],
      };
      expect((await notify(reply)).body.data.applied).toBe(1);
      expect((await notify(reply)).body.data.applied).toBe(0);
      const inbound = await api(t.app, 'GET', '/api/messages/inbound', { token: o.token });
      expect(inbound.body.data.data).toMatchObject([
        { channel: 'whatsapp', from: asha, body: 'STOP', keyword: 'stop' },
      ]);
      const refused = await api(t.app, 'POST', '/api/messages/send', {
        token: o.token,
        body: { channel: 'whatsapp', to: asha, message: 'Again' },
      });
      expect(refused.status).toBe(422);
    });

    it("Twilio: an account's own SID and token; status callbacks to its URL, signed with its token", async () => {
      const o = await owner();
      const account = (
        await createAccount(o.token, {
          name: 'Twilio',
          provider: 'twilio',
          settings: { account_sid: TWILIO.sid, sms_from: '+15005550006' },
          credentials: { auth_token: TWILIO.token },
          default_for: ['sms'],
        })
      ).body.data;
      expect(account.channels).toEqual(['sms']);
      const to = uniquePhone();
      const sent = await api(t.app, 'POST', '/api/messages/send', {
        token: o.token,
        body: { channel: 'sms', to, message: 'Hi' },
      });
      expect(sent.body.data).toMatchObject({ provider: 'twilio', channel_account_id: account.id });
      const request = twilio.requests.at(-1)!;
      expect(request.path).toBe(`/2010-04-01/Accounts/${TWILIO.sid}/Messages.json`);
      const callbackUrl = `${account.callback_urls.delivery}?message=${sent.body.data.id}`;
      expect(request.form).toMatchObject({
        From: '+15005550006',
        To: to,
        Body: 'Hi',
        StatusCallback: callbackUrl,
      });
      const delivered = {
        MessageSid: request.form.MessageSid ?? 'SM1',
        MessageStatus: 'delivered',
        AccountSid: TWILIO.sid,
      };
      const sign = (token: string, url: string, params: Record<string, string>) =>
        createHmac('sha1', token)
          .update(
            Object.keys(params)
              .sort()
              .reduce((acc, k) => acc + k + params[k], url),
          )
          .digest('base64');
      const report = (url: string, params: Record<string, string>, token: string) =>
        post(url, new URLSearchParams(params).toString(), 'application/x-www-form-urlencoded', {
          'x-twilio-signature': sign(token, url, params),
        });
      expectError(await report(callbackUrl, delivered, 'not-the-token'), 401, 'unauthorized');
      expect((await message(o.token, sent.body.data.id)).status).toBe('sent');
      expect((await report(callbackUrl, delivered, TWILIO.token)).body.data.applied).toBe(1);
      expect((await message(o.token, sent.body.data.id)).status).toBe('delivered');

      // Twilio's 21610 (the recipient texted STOP to the number): failed opted_out, and the address opted out,
      // as on the deployment's own Twilio callback.
      const again = await api(t.app, 'POST', '/api/messages/send', {
        token: o.token,
        body: { channel: 'sms', to, message: 'Hello again' },
      });
      const againUrl = `${account.callback_urls.delivery}?message=${again.body.data.id}`;
      const stopped = {
        MessageSid: 'SM2',
        MessageStatus: 'undelivered',
        ErrorCode: '21610',
        AccountSid: TWILIO.sid,
      };
      expect((await report(againUrl, stopped, TWILIO.token)).body.data.applied).toBe(1);
      expect(await message(o.token, again.body.data.id)).toMatchObject({
        status: 'failed',
        error_code: 'opted_out',
      });
      const optedOut = await t.db.kysely
        .selectFrom('opt_outs')
        .select(['channel', 'source'])
        .where('workspace_id', '=', o.user.workspace_id)
        .where('address', '=', to)
        .execute();
      expect(optedOut).toEqual([{ channel: 'sms', source: 'provider' }]);
    });

    it.runIf(redisUrl)(
      'holds an account’s send_rate_per_second across two workers (through Redis)',
      async () => {
        const o = await owner();
        const account = (
          await createAccount(o.token, {
            name: 'Exotel slow',
            provider: 'exotel',
            settings: { sid: EXOTEL.sid, sender: 'CESOFC' },
            credentials: { api_key: EXOTEL.apiKey, api_token: EXOTEL.apiToken },
            default_for: ['sms'],
            send_rate_per_second: 4,
          })
        ).body.data;
        const recipients = Array.from({ length: 12 }, () => uniquePhone());
        const res = await api(t.app, 'POST', '/api/messages/broadcast', {
          token: o.token,
          body: { channel: 'sms', message: 'Booth list is out', recipients },
        });
        expect(res.status).toBe(202);
        const config = {
          ...t.config,
          redisPrefix: `test:${randomUUID()}:`,
          delivery: { ...t.config.delivery, batchSize: 3, pollMs: 20 },
        };
        const clients = [new Redis(redisUrl!), new Redis(redisUrl!)];
        const workers = clients.map(
          (redis) =>
            new DeliveryWorker({
              db: t.db,
              config,
              providers: t.providers,
              log: pino({ level: 'silent' }),
              redis,
            }),
        );
        const ours = () => exotel.requests.filter((r) => recipients.includes(r.form.To ?? ''));
        try {
          for (const w of workers) w.start();
          await until(async () => ours().length === 12, 'the twelve messages to go out');
        } finally {
          await Promise.all(workers.map((w) => w.stop()));
          for (const redis of clients) redis.disconnect();
        }
        const times = ours()
          .map((r) => r.at)
          .sort((x, y) => x - y);
        // 12 at 4 per second share the seconds of the clock (Redis counts each account's messages per second): no
        // second holds more than 4 (5 where a request sent at a second's end reached the double in the next), so
        // they span 3 seconds at least. Each worker alone would send 4 a second, 8 between them.
        const perSecond = new Map<number, number>();
        for (const at of times)
          perSecond.set(Math.floor(at / 1000), (perSecond.get(Math.floor(at / 1000)) ?? 0) + 1);
        expect(Math.max(...perSecond.values())).toBeLessThanOrEqual(5);
        expect(perSecond.size).toBeGreaterThanOrEqual(3);
        expect(account.send_rate_per_second).toBe(4);
      },
    );

    it('credentials never appear in an answer, a log line or an audit entry', async () => {
      const audits = [];
      for (const o of owners)
        audits.push((await call(t.app, 'GET', '/api/audit-log?per_page=100', { token: o.token })).raw);
      const everything = [...answers, ...audits, ...lines].join('\n');
      expect(lines.length).toBeGreaterThan(10);
      for (const secret of SECRETS) expect(everything, secret).not.toContain(secret);
    });
  });
}
