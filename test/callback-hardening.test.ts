/**
 * The callback path as a hostile tenant and an outsider would try it (issue 54): deeply nested JSON, a
 * wrong signature with a body built to overflow the stack, a URL with a segment more than its kind.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, call, dialects, register, type TestApp } from './helpers.ts';

for (const dialect of dialects) {
  describe(`provider callbacks, hardened (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect, { PUBLIC_BASE_URL: 'https://ces.example.org' });
    });
    afterAll(() => t?.close());

    const deep = (depth: number) => `{"x":${'['.repeat(depth)}${']'.repeat(depth)}}`;

    it('a body nested 5,000 deep is 400 before anything reads it, on an account URL and a signed webhook', async () => {
      const owner = await register(t.app);
      const msg91 = await call(t.app, 'POST', '/api/channel-accounts', {
        token: owner.token,
        body: {
          name: 'MSG91',
          provider: 'msg91',
          settings: { sender: 'CESOFC' },
          credentials: { authkey: 'msg91-authkey-0123456789' },
        },
      });
      expect(msg91.status, msg91.raw).toBe(201);
      const delivery = new URL(msg91.body.data.callback_urls.delivery as string).pathname;
      const res = await t.app.inject({
        method: 'POST',
        url: delivery,
        headers: { 'content-type': 'application/json' },
        payload: deep(5000),
      });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().message).toMatch(/nests objects and arrays more than 64 deep/);
      const api = await t.app.inject({
        method: 'POST',
        url: '/api/voters',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${owner.token}` },
        payload: deep(5000),
      });
      expect(api.statusCode, api.body).toBe(400);
      // WhatsApp's webhook signs the raw body: a wrong signature is 401 before the body is read at all, so a
      // body that is not even JSON costs an outsider nothing but the signature check.
      const meta = await call(t.app, 'POST', '/api/channel-accounts', {
        token: owner.token,
        body: {
          name: 'WhatsApp',
          provider: 'whatsapp_cloud',
          settings: { phone_number_id: '106540352242922', waba_id: '102290129340398' },
          credentials: { access_token: 'EAAG-meta-token', app_secret: 'meta-app-secret' },
        },
      });
      expect(meta.status, meta.raw).toBe(201);
      const webhook = new URL(meta.body.data.callback_urls.webhook as string).pathname;
      for (const payload of ['{"entry": [', deep(60)]) {
        const refused = await t.app.inject({
          method: 'POST',
          url: webhook,
          headers: { 'content-type': 'application/json', 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` },
          payload,
        });
        expect(refused.statusCode, refused.body).toBe(401);
      }
    });

    it("the deployment's Twilio routes: an unsigned body of 10 KB, of any shape, is 403", async () => {
      const twilio = await buildTestApp(dialect, {
        SMS_PROVIDER: 'twilio',
        TWILIO_ACCOUNT_SID: 'AC0000',
        TWILIO_AUTH_TOKEN: 'twilio-auth-token',
        TWILIO_SMS_FROM: '+15005550006',
        PUBLIC_BASE_URL: 'https://ces.example.org',
      });
      try {
        const bodies: Array<[string, string]> = [
          ['application/x-www-form-urlencoded', `Body=${'x'.repeat(10_000)}&From=%2B15005550006`],
          ['application/x-www-form-urlencoded', Array.from({ length: 1000 }, (_, i) => `f${i}=v`).join('&')],
          ['application/json', JSON.stringify({ Body: 'x'.repeat(10_000) })],
          ['application/json', deep(60)],
          ['text/plain', 'x'.repeat(10_000)],
        ];
        for (const kind of ['status', 'inbound'])
          for (const [type, payload] of bodies) {
            const res = await twilio.app.inject({
              method: 'POST',
              url: `/api/providers/twilio/${kind}`,
              headers: { 'content-type': type },
              payload,
            });
            expect(res.statusCode, `${kind} ${type} ${res.body}`).toBe(403);
          }
      } finally {
        await twilio.close();
      }
    });
  });
}
