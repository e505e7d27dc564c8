/**
 * Channel accounts' seams (the contract's fourth part): one default per channel however the requests race (a
 * constraint, not a read-then-write), and settings and credentials that accept only the provider's own keys,
 * prototype names included.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, call, dialects, expectError, register, type TestApp, uniquePhone } from './helpers.ts';
import { until } from './messaging-helpers.ts';

/** MSG91's Flow API (POST /api/v5/flow): records each request's template and recipients, answers success. */
async function flows() {
  const received: Array<{ template_id: string; recipients: Array<Record<string, string>> }> = [];
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      received.push(JSON.parse(raw) as (typeof received)[number]);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ type: 'success', message: `otp${received.length}` }));
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

for (const dialect of dialects) {
  describe(`channel accounts' seams (${dialect})`, () => {
    let t: TestApp;
    let msg91: Awaited<ReturnType<typeof flows>>;
    beforeAll(async () => {
      msg91 = await flows();
      t = await buildTestApp(dialect, { MSG91_BASE_URL: msg91.url });
    });
    afterAll(async () => {
      await t?.close();
      await msg91?.close();
    });

    it("sign-in codes go through the workspace's default SMS account: MSG91 with its DLT OTP template", async () => {
      const phone = uniquePhone();
      const owner = await register(t.app, { phone });
      const created = await call(t.app, 'POST', '/api/channel-accounts', {
        token: owner.token,
        body: {
          name: 'MSG91',
          provider: 'msg91',
          settings: { sender: 'CESOFC', otp_template_id: '65a0f0otp' },
          credentials: { authkey: 'msg91-authkey-0123456789' },
          default_for: ['sms'],
        },
      });
      expect(created.status, created.raw).toBe(201);
      const deploymentSent = t.providers.sms.sent.length;
      expect((await call(t.app, 'POST', '/api/auth/send-otp', { body: { phone } })).status).toBe(200);
      await until(
        async () => msg91.received.some((f) => f.recipients.some((r) => r.mobiles === phone.slice(1))),
        'the code through MSG91',
      );
      const flow = msg91.received.find((f) => f.recipients.some((r) => r.mobiles === phone.slice(1)))!;
      expect(flow.template_id).toBe('65a0f0otp');
      const code = flow.recipients[0]!.otp!;
      expect(code).toMatch(/^\d{6}$/);
      expect(t.providers.sms.sent.length).toBe(deploymentSent);
      const signedIn = await call(t.app, 'POST', '/api/auth/verify-otp', { body: { phone, otp: code } });
      expect(signedIn.status, signedIn.raw).toBe(200);
    });

    const sandbox = async (token: string, name: string) => {
      const res = await call(t.app, 'POST', '/api/channel-accounts', {
        token,
        body: { name, provider: 'sandbox', channels: ['sms'] },
      });
      expect(res.status, res.raw).toBe(201);
      return res.body.data.id as string;
    };

    it('concurrent default_for changes leave one default per channel (10 trials)', async () => {
      const owner = await register(t.app);
      const ids = await Promise.all(['A', 'B', 'C'].map((name) => sandbox(owner.token, name)));
      for (let trial = 0; trial < 10; trial += 1) {
        const answers = await Promise.all(
          ids.map((id) =>
            call(t.app, 'PATCH', `/api/channel-accounts/${id}`, {
              token: owner.token,
              body: { default_for: ['sms'] },
            }),
          ),
        );
        for (const answer of answers) expect(answer.status, answer.raw).toBe(200);
        const list = await call(t.app, 'GET', '/api/channel-accounts', { token: owner.token });
        const defaults = list.body.data.data.filter((a: { default_for: string[] }) =>
          a.default_for.includes('sms'),
        );
        expect(defaults, `trial ${trial}`).toHaveLength(1);
      }
    });

    it('concurrent creates with default_for leave one default per channel (10 trials)', async () => {
      for (let trial = 0; trial < 10; trial += 1) {
        const owner = await register(t.app);
        const answers = await Promise.all(
          ['A', 'B', 'C'].map((name) =>
            call(t.app, 'POST', '/api/channel-accounts', {
              token: owner.token,
              body: { name, provider: 'sandbox', channels: ['sms'], default_for: ['sms'] },
            }),
          ),
        );
        for (const answer of answers) expect(answer.status, answer.raw).toBe(201);
        const list = await call(t.app, 'GET', '/api/channel-accounts', { token: owner.token });
        const defaults = list.body.data.data.filter((a: { default_for: string[] }) =>
          a.default_for.includes('sms'),
        );
        expect(defaults, `trial ${trial}`).toHaveLength(1);
      }
    });

    it('refuses keys that are not the provider’s, prototype names included, each on its own field', async () => {
      const owner = await register(t.app);
      for (const key of ['constructor', 'valueOf', 'toString', 'hasOwnProperty', 'isPrototypeOf']) {
        const raw = `{"name":"MSG91","provider":"msg91","settings":{"sender":"CESOFC","${key}":"x"},"credentials":{"authkey":"k","${key}":"y"}}`;
        const res = await call(t.app, 'POST', '/api/channel-accounts', {
          token: owner.token,
          body: raw,
          headers: { 'content-type': 'application/json' },
        });
        expectError(res, 422, 'validation_error');
        expect(Object.keys(res.body.details).sort(), key).toEqual([`credentials.${key}`, `settings.${key}`]);
      }
      // `__proto__` does not get that far: the JSON parser refuses the whole body (400), as for any request.
      const poisoned = await call(t.app, 'POST', '/api/channel-accounts', {
        token: owner.token,
        body: '{"name":"M","provider":"msg91","settings":{"sender":"C","__proto__":{"x":1}},"credentials":{"authkey":"k"}}',
        headers: { 'content-type': 'application/json' },
      });
      expectError(poisoned, 400, 'bad_request');
      const list = await call(t.app, 'GET', '/api/channel-accounts', { token: owner.token });
      expect(list.body.data.total).toBe(0);
    });
  });
}
