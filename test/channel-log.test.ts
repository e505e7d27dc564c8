/**
 * The channel log (the contract's fifth part, "One outbox, and the channel log"): every exchange with an
 * account's provider, in and out, redacted (credentials and tokens `***`, numbers with their last 4 characters,
 * message texts and template values `[n characters]`), for politicians and managers, newest first.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
import { type Double, fakeMsg91, MSG91_AUTHKEY } from './provider-doubles.ts';
import { redactBody } from '../src/modules/sending/channel-log.ts';

it('redacts a body: secrets, numbers to their last 4 characters, texts to their length, cut at 4 KB', () => {
  const flow = JSON.stringify({
    template_id: 'flow_rally',
    recipients: [{ mobiles: '919812345678', name: 'Shanti Devi', ward: 'Ward 12' }],
  });
  expect(JSON.parse(redactBody(flow, [], true))).toEqual({
    template_id: 'flow_rally',
    recipients: [{ mobiles: '********5678', name: '[11 characters]', ward: '[7 characters]' }],
  });
  const form = 'To=%2B919812345678&Body=Rally+at+5&From=CESOFC&auth_token=abc123';
  expect(redactBody(form, [], true)).toBe('To=*********5678&Body=[10 characters]&From=CESOFC&auth_token=***');
  expect(
    redactBody('{"error":"bad key msg91-secret-key for asha@example.org"}', ['msg91-secret-key'], false),
  ).toBe('{"error":"bad key *** for ************.org"}');
  expect(redactBody('x'.repeat(10_000), [], false).length).toBeLessThanOrEqual(4097);
  // A provider's request id is no phone number, though it holds a run of digits.
  expect(redactBody('{"type":"success","message":"3763646c0000000000000001"}', [], false)).toBe(
    '{"type":"success","message":"3763646c0000000000000001"}',
  );
});

for (const dialect of dialects) {
  describe(`the channel log (${dialect})`, () => {
    let t: TestApp;
    let msg91: Double;
    beforeAll(async () => {
      msg91 = await fakeMsg91();
      t = await buildTestApp(dialect, {
        MSG91_BASE_URL: msg91.url,
        PUBLIC_BASE_URL: 'https://ces.example.org',
      });
    });
    afterAll(async () => {
      await t?.close();
      await msg91?.close();
    });

    it('keeps a send and a delivery report, redacted, for politicians and managers only', async () => {
      const owner = await register(t.app);
      const as = (who: { token: string }, method: string, url: string, body?: unknown) =>
        call(t.app, method, url, { token: who.token, ...(body === undefined ? {} : { body }) });
      const account = (
        await as(owner, 'POST', '/api/channel-accounts', {
          name: 'MSG91',
          provider: 'msg91',
          settings: { sender: 'CESOFC' },
          credentials: { authkey: MSG91_AUTHKEY },
          default_for: ['sms'],
        })
      ).body.data;
      const template = (
        await as(owner, 'POST', '/api/templates', {
          name: 'Rally',
          channel: 'sms',
          body: 'Namaste {{name}}, the rally is at 5.',
          provider_template_ids: { msg91: 'flow_rally' },
        })
      ).body.data;
      const phone = uniquePhone();
      await as(owner, 'POST', '/api/voters', { name: 'Shanti Devi', phone });
      const sent = await as(owner, 'POST', '/api/messages/send', {
        channel: 'sms',
        to: phone,
        template_id: template.id,
      });
      expect(sent.status, sent.raw).toBe(201);
      // MSG91 reports it delivered, to the account's delivery URL.
      const message = (await as(owner, 'GET', `/api/messages/${sent.body.data.id}`)).body.data;
      const requestId = message.provider_message_id as string;
      expect(requestId).toMatch(/^3763646c/);
      const delivery = new URL(account.callback_urls.delivery as string).pathname;
      const token = delivery.split('/')[5]!;
      const report = await call(t.app, 'POST', delivery, {
        body: [{ requestId, report: [{ number: phone.slice(1), status: '1', desc: 'DELIVERED' }] }],
      });
      expect(report.status, report.raw).toBe(200);

      const log = await as(owner, 'GET', `/api/channel-accounts/${account.id}/log`);
      expect(log.status, log.raw).toBe(200);
      const entries = log.body.data.data as Array<Record<string, unknown>>;
      expect(entries.map((e) => [e.direction, e.kind, e.status])).toEqual([
        ['in', 'status', 200],
        ['out', 'send', 200],
      ]);
      const [inbound, outbound] = entries as [Record<string, string>, Record<string, string>];
      expect(outbound).toMatchObject({ method: 'POST', message_id: sent.body.data.id, error_code: null });
      expect(outbound.url).toBe(`${msg91.url}/api/v5/flow`);
      expect(JSON.parse(outbound.request!)).toMatchObject({
        template_id: 'flow_rally',
        recipients: [{ mobiles: `********${phone.slice(-4)}`, name: '[11 characters]' }],
      });
      expect(JSON.parse(outbound.response!)).toMatchObject({ type: 'success' });
      expect(inbound.url).toContain('/***/delivery');
      expect(inbound.request).toContain(`${phone.slice(-4)}`);
      const everything = JSON.stringify(entries);
      for (const secret of [MSG91_AUTHKEY, token, phone, phone.slice(1), 'Shanti'])
        expect(everything).not.toContain(secret);

      // Managers read it too; volunteers do not; another workspace's account is not found.
      const manager = await addMember(t.app, owner, 'manager');
      expect((await as(manager, 'GET', `/api/channel-accounts/${account.id}/log`)).status).toBe(200);
      const volunteer = await addMember(t.app, owner, 'volunteer');
      expectError(await as(volunteer, 'GET', `/api/channel-accounts/${account.id}/log`), 403, 'forbidden');
      const other = await register(t.app);
      expectError(await as(other, 'GET', `/api/channel-accounts/${account.id}/log`), 404, 'not_found');
    });
  });
}
