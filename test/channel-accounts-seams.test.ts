/**
 * Channel accounts' seams (the contract's fourth part): one default per channel however the requests race (a
 * constraint, not a read-then-write), and settings and credentials that accept only the provider's own keys,
 * prototype names included.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, call, dialects, expectError, register, type TestApp } from './helpers.ts';

for (const dialect of dialects) {
  describe(`channel accounts' seams (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
    });
    afterAll(() => t?.close());

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
