import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consentKeyword } from '../src/modules/inbound/inbound.keywords.ts';
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

const TOKEN = 'twilio-auth-token-for-tests';
const PUBLIC = 'https://ces.example.org';

function sign(url: string, params: Record<string, string>): string {
  const data = Object.keys(params)
    .sort()
    .reduce((acc, k) => acc + k + params[k], url);
  return createHmac('sha1', TOKEN).update(data).digest('base64');
}

describe('consent keywords', () => {
  it('reads the whole text, any case, trailing punctuation dropped, English and Hindi; a longer text is a message', () => {
    for (const body of [
      'STOP',
      ' Stop.',
      'stop!!',
      'STOPALL',
      'unsubscribe',
      'Cancel',
      'END',
      'quit!',
      'बंद',
      'बंद।',
      'रोकें',
      'रुको',
    ]) {
      expect(consentKeyword(body), body).toBe('stop');
    }
    for (const body of ['START', 'unstop', 'Start.', 'शुरू']) expect(consentKeyword(body), body).toBe('start');
    for (const body of [
      '',
      'stop please',
      'Please stop',
      'stopping by',
      'ok',
      'BAND',
      'Start again',
      // Complaints that begin with a stop word (issue 37): messages, not opt-outs.
      'End of the road near my house has potholes',
      'बंद नाली की वजह से गली में पानी भरा है',
      'Cancel the rally? The ground is flooded',
    ])
      expect(consentKeyword(body), body).toBeNull();
  });
});

for (const dialect of dialects) {
  describe(`replies (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      // IVR on Twilio makes the Twilio settings (and its inbound callback) exist; the tests' providers stay the sandbox.
      t = await buildTestApp(dialect, {
        IVR_PROVIDER: 'twilio',
        TWILIO_ACCOUNT_SID: 'AC0000',
        TWILIO_AUTH_TOKEN: TOKEN,
        PUBLIC_BASE_URL: PUBLIC,
        WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      });
    });
    afterAll(() => t.close());

    const reply = (owner: Account, body: unknown) =>
      call(t.app, 'POST', '/api/inbound', { token: owner.token, body });
    const optOuts = async (owner: Account) =>
      (await call(t.app, 'GET', '/api/opt-outs', { token: owner.token })).body.data.data as Array<{
        address: string;
        channel: string;
        source: string;
      }>;

    it('keeps replies, lists them, and emits message.received to subscribed webhooks', async () => {
      const owner = await register(t.app);
      const hook = await call(t.app, 'POST', '/api/webhooks', {
        token: owner.token,
        body: { url: 'http://127.0.0.1:9/in', events: ['message.received'] },
      });
      const phone = uniquePhone();
      const res = await reply(owner, {
        channel: 'whatsapp',
        from: phone.slice(3),
        body: 'When is the rally?',
      });
      expect(res.status).toBe(201);
      expect(res.body.data).toMatchObject({
        channel: 'whatsapp',
        from: phone,
        body: 'When is the rally?',
        keyword: null,
      });
      expect(res.body.data.id).toMatch(/^in_\d+$/);
      const list = await call(t.app, 'GET', '/api/messages/inbound', { token: owner.token });
      expect(list.body.data.total).toBe(1);
      expect(list.body.data.data[0]).toEqual(res.body.data);
      expect(
        (await call(t.app, 'GET', '/api/messages/inbound?channel=sms', { token: owner.token })).body.data
          .total,
      ).toBe(0);
      const events = await t.db.kysely
        .selectFrom('webhook_events')
        .select(['type', 'payload'])
        .where('workspace_id', '=', owner.user.workspace_id)
        .execute();
      expect(hook.status).toBe(201);
      expect(events.map((e) => e.type)).toEqual(['message.received']);
      expect(JSON.parse(events[0]!.payload)).toEqual(res.body.data);
      expect(await optOuts(owner)).toEqual([]);
    });

    it('STOP opts the sender out of that channel (keyword); START removes only a keyword opt-out', async () => {
      const owner = await register(t.app);
      const phone = uniquePhone();
      const stop = await reply(owner, { channel: 'sms', from: phone, body: 'stop' });
      expect(stop.body.data.keyword).toBe('stop');
      expect(await optOuts(owner)).toMatchObject([{ address: phone, channel: 'sms', source: 'keyword' }]);
      const send = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: phone, message: 'Hello' },
      });
      expectError(send, 422, 'validation_error');
      // WhatsApp is another channel.
      const wa = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'whatsapp', to: phone, message: 'Hello' },
      });
      expect(wa.status).toBe(201);
      const start = await reply(owner, { channel: 'sms', from: phone, body: 'START' });
      expect(start.body.data.keyword).toBe('start');
      expect(await optOuts(owner)).toEqual([]);
      // A manual opt-out stays through START.
      await call(t.app, 'POST', '/api/opt-outs', {
        token: owner.token,
        body: { address: phone, channel: 'sms' },
      });
      await reply(owner, { channel: 'sms', from: phone, body: 'बंद' });
      await reply(owner, { channel: 'sms', from: phone, body: 'unstop' });
      expect(await optOuts(owner)).toMatchObject([{ address: phone, channel: 'sms', source: 'manual' }]);
      const audit = await t.db.kysely
        .selectFrom('audit_log')
        .select('action')
        .where('workspace_id', '=', owner.user.workspace_id)
        .where('action', 'like', 'opt_out.%')
        .orderBy('id')
        .execute();
      // STOP, START, then the manual one (the second STOP found it there, the UNSTOP left it).
      expect(audit.map((a) => a.action)).toEqual(['opt_out.created', 'opt_out.deleted', 'opt_out.created']);
    });

    it('refuses bad input, volunteers and unsigned callers', async () => {
      const owner = await register(t.app);
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const bad = await reply(owner, { channel: 'sms', from: 'nobody', body: 'STOP' });
      expectError(bad, 422, 'validation_error');
      expect(Object.keys(bad.body.details)).toEqual(['from']);
      expectError(await reply(owner, { channel: 'sms', from: uniquePhone() }), 422, 'validation_error');
      expectError(
        await reply(volunteer, { channel: 'sms', from: uniquePhone(), body: 'x' }),
        403,
        'forbidden',
      );
      expectError(
        await call(t.app, 'GET', '/api/messages/inbound', { token: volunteer.token }),
        403,
        'forbidden',
      );
      expectError(
        await call(t.app, 'POST', '/api/inbound', {
          body: { channel: 'sms', from: uniquePhone(), body: 'x' },
        }),
        401,
        'unauthorized',
      );
    });

    it('the Twilio inbound callback verifies its signature; a reply belongs to the workspace that last messaged the sender, a STOP opts out in every one that did', async () => {
      const owner = await register(t.app);
      const other = await register(t.app);
      const bystander = await register(t.app);
      const phone = uniquePhone();
      for (const account of [owner, other]) {
        const sent = await call(t.app, 'POST', '/api/messages/send', {
          token: account.token,
          body: { channel: 'sms', to: phone, message: 'Hello' },
        });
        expect(sent.status).toBe(201);
      }
      const path = '/api/providers/twilio/inbound';
      const params = { From: phone, To: '+15005550006', Body: 'STOP', MessageSid: 'SM1' };
      const post = (p: Record<string, string>, signature: string) =>
        call(t.app, 'POST', path, {
          body: new URLSearchParams(p).toString(),
          headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': signature },
        });
      expectError(await post(params, 'c2lnbmF0dXJl'), 403, 'forbidden');
      expectError(
        await post({ ...params, From: uniquePhone() }, sign(`${PUBLIC}${path}`, params)),
        403,
        'forbidden',
      );
      expect(await optOuts(owner)).toEqual([]);
      const ok = await post(params, sign(`${PUBLIC}${path}`, params));
      expect(ok.status).toBe(200);
      expect(ok.headers['content-type']).toMatch(/^text\/xml/);
      expect(ok.raw).toContain('<Response>');
      // Twilio retries and replays of the same validly signed request (same MessageSid) are stored once.
      for (let i = 0; i < 2; i++)
        expect((await post(params, sign(`${PUBLIC}${path}`, params))).status).toBe(200);
      for (const account of [owner, other])
        expect(await optOuts(account)).toMatchObject([{ address: phone, channel: 'sms', source: 'keyword' }]);
      // The reply itself is the last sender's alone: a rival office that also messaged the voter never reads it.
      const theirs = await call(t.app, 'GET', '/api/messages/inbound', { token: other.token });
      expect(theirs.body.data.data).toMatchObject([{ from: phone, body: 'STOP', keyword: 'stop' }]);
      expect(theirs.body.data.total).toBe(1);
      const rival = await call(t.app, 'GET', '/api/messages/inbound', { token: owner.token });
      expect(rival.body.data.total).toBe(0);
      const complaint = {
        From: phone,
        To: '+15005550006',
        Body: 'The road near my house',
        MessageSid: 'SM9',
      };
      expect((await post(complaint, sign(`${PUBLIC}${path}`, complaint))).status).toBe(200);
      expect(
        (await call(t.app, 'GET', '/api/messages/inbound', { token: owner.token })).body.data.total,
      ).toBe(0);
      expect(
        (await call(t.app, 'GET', '/api/messages/inbound', { token: other.token })).body.data.total,
      ).toBe(2);
      expect(await optOuts(bystander)).toEqual([]);
      expect(
        (await call(t.app, 'GET', '/api/messages/inbound', { token: bystander.token })).body.data.total,
      ).toBe(0);
      // A WhatsApp reply names its sender as whatsapp:+91...; nobody messaged it there, so nothing is kept.
      const wa = { From: `whatsapp:${phone}`, Body: 'hello' };
      expect((await post(wa, sign(`${PUBLIC}${path}`, wa))).status).toBe(200);
      expect(
        (await call(t.app, 'GET', '/api/messages/inbound', { token: other.token })).body.data.total,
      ).toBe(2);
    });

    it('a Twilio status callback with error 21610 (unsubscribed at Twilio) opts the recipient out, source provider', async () => {
      const owner = await register(t.app);
      const phone = uniquePhone();
      const sent = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: phone, message: 'Hello' },
      });
      const path = `/api/providers/twilio/status?message=${sent.body.data.id}`;
      const params = { MessageSid: 'SM2', MessageStatus: 'undelivered', ErrorCode: '21610' };
      const res = await call(t.app, 'POST', path, {
        body: new URLSearchParams(params).toString(),
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          'x-twilio-signature': sign(`${PUBLIC}${path}`, params),
        },
      });
      expect(res.status).toBe(200);
      expect(await optOuts(owner)).toMatchObject([{ address: phone, channel: 'sms', source: 'provider' }]);
    });
  });
}
