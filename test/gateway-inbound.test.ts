/**
 * MSG91 and Exotel accounts take replies (the contract's fourth part, "Seams"): `callback_urls.inbound`, in
 * each provider's inbound-SMS form: Exotel's SMS app "Send a Reply" URL (a HEAD, then a GET with SmsSid, From,
 * To, Date, Body; https://support.exotel.com/support/solutions/articles/45270), MSG91's inbound forwarding
 * (number, message, keyword, inboundNumber, date; GET or POST). A reply joins the workspace's conversations, a
 * STOP opts its sender out, and a wrong token changes nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, call, dialects, expectError, register, type TestApp, uniquePhone } from './helpers.ts';

for (const dialect of dialects) {
  describe(`SMS replies through MSG91 and Exotel accounts (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect, { PUBLIC_BASE_URL: 'https://ces.example.org' });
    });
    afterAll(() => t?.close());

    const pathOf = (url: string) => new URL(url).pathname;
    const account = async (token: string, body: Record<string, unknown>) => {
      const res = await call(t.app, 'POST', '/api/channel-accounts', { token, body });
      expect(res.status, res.raw).toBe(201);
      expect(Object.keys(res.body.data.callback_urls)).toContain('inbound');
      return pathOf(res.body.data.callback_urls.inbound as string);
    };

    it('Exotel: HEAD then GET with SmsSid, From, To, Date, Body; a STOP opts out; a replay is kept once', async () => {
      const owner = await register(t.app);
      const path = await account(owner.token, {
        name: 'Exotel',
        provider: 'exotel',
        settings: { sid: 'office1', sender: 'CESOFC' },
        credentials: { api_key: 'key', api_token: 'token' },
      });
      const phone = uniquePhone();
      const national = `0${phone.slice(3)}`;
      const query = (body: string, sid: string) =>
        `${path}?${new URLSearchParams({ SmsSid: sid, From: national, To: '08088919888', Date: '2026-11-27 10:00:00', Body: body })}`;
      const head = await t.app.inject({ method: 'HEAD', url: query('Water supply cut in ward 12', 'sms1') });
      expect(head.statusCode).toBe(200);
      expect(head.headers['content-type']).toMatch(/^text\/plain/);
      for (let i = 0; i < 2; i += 1) {
        const res = await call(t.app, 'GET', query('Water supply cut in ward 12', 'sms1'));
        expect(res.status).toBe(200);
        expect(res.headers['content-type']).toMatch(/^text\/plain/);
        expect(res.raw).toBe('');
      }
      const stop = await call(t.app, 'GET', query('STOP', 'sms2'));
      expect(stop.status).toBe(200);
      const inbound = await call(t.app, 'GET', '/api/messages/inbound', { token: owner.token });
      expect(inbound.body.data.total).toBe(2);
      expect(
        inbound.body.data.data.map((m: { from: string; keyword: string | null }) => [m.from, m.keyword]),
      ).toEqual([
        [phone, 'stop'],
        [phone, null],
      ]);
      const conversations = await call(t.app, 'GET', '/api/conversations', { token: owner.token });
      expect(conversations.body.data.data).toMatchObject([{ address: phone, channel: 'sms' }]);
      const optOuts = await call(t.app, 'GET', '/api/opt-outs', { token: owner.token });
      expect(optOuts.body.data.data).toMatchObject([{ address: phone, channel: 'sms', source: 'keyword' }]);
      // A wrong token: 401, nothing kept.
      const forged = path.replace(/\/[^/]+\/inbound$/, '/not-the-token/inbound');
      expectError(
        await call(t.app, 'GET', `${forged}?From=${national}&Body=STOP&SmsSid=x`),
        401,
        'unauthorized',
      );
    });

    it('a complaint that begins with a stop word opts nobody out, and the office can answer it', async () => {
      const owner = await register(t.app);
      for (const body of [
        'End of the road near my house has potholes',
        'बंद नाली की वजह से गली में पानी भरा है',
      ]) {
        const from = uniquePhone();
        const reply = await call(t.app, 'POST', '/api/inbound', {
          token: owner.token,
          body: { channel: 'sms', from, body },
        });
        expect(reply.status, reply.raw).toBe(201);
        expect(reply.body.data.keyword).toBeNull();
        const answer = await call(t.app, 'POST', '/api/messages/send', {
          token: owner.token,
          body: { channel: 'sms', to: from, message: 'We have told the ward office.' },
        });
        expect(answer.status, answer.raw).toBe(201);
      }
      const optOuts = await call(t.app, 'GET', '/api/opt-outs', { token: owner.token });
      expect(optOuts.body.data.total).toBe(0);
    });

    it('MSG91: a forwarded reply by POST (form or JSON) or GET joins a conversation; STOP opts out', async () => {
      const owner = await register(t.app);
      const path = await account(owner.token, {
        name: 'MSG91',
        provider: 'msg91',
        settings: { sender: 'CESOFC' },
        credentials: { authkey: 'msg91-authkey-0123456789' },
      });
      const phone = uniquePhone();
      const fields = {
        inboundNumber: '919223344556',
        number: phone.slice(1),
        keyword: 'CES',
        message: 'CES The streetlight on our lane is broken',
        date: '2026-11-27 10:00:00',
      };
      const form = await call(t.app, 'POST', path, {
        body: new URLSearchParams(fields).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expect(form.status, form.raw).toBe(200);
      expect(form.body.data.applied).toBe(1);
      // MSG91 forwarding the same reply again: kept once.
      const again = await call(t.app, 'POST', path, { body: fields });
      expect(again.body.data.applied).toBe(0);
      const stop = await call(
        t.app,
        'GET',
        `${path}?${new URLSearchParams({ ...fields, message: 'stop', date: '2026-11-27 10:05:00' })}`,
      );
      expect(stop.status).toBe(200);
      const inbound = await call(t.app, 'GET', '/api/messages/inbound', { token: owner.token });
      expect(inbound.body.data.total).toBe(2);
      const optOuts = await call(t.app, 'GET', '/api/opt-outs', { token: owner.token });
      expect(optOuts.body.data.data).toMatchObject([{ address: phone, channel: 'sms', source: 'keyword' }]);
    });
  });
}
