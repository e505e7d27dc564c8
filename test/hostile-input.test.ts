import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Account,
  type Answer,
  buildTestApp,
  call,
  dialects,
  expectError,
  multipartBody,
  register,
  type TestApp,
} from './helpers.ts';

/** Names inherited from Object.prototype: as field names they must be plain unknown fields. */
const PROTOTYPE_NAMES = ['toString', 'constructor', 'hasOwnProperty', 'valueOf', '__defineGetter__'];

/** The error envelope, and nothing of Fastify's own body. */
function expectEnvelope(res: Answer, status: number, code: string): void {
  expectError(res, status, code);
  expect(res.headers['x-request-id']).toBeTruthy();
  expect(res.raw).not.toMatch(/FST_ERR|statusCode/);
}

for (const dialect of dialects) {
  describe(`hostile input (${dialect})`, () => {
    let t: TestApp;
    let owner: Account;
    beforeAll(async () => {
      t = await buildTestApp(dialect, { QUIET_HOURS: '' });
      owner = await register(t.app);
    });
    afterAll(() => t.close());

    it('a body field named after an Object.prototype member is an unknown field (422), on any route', async () => {
      for (const name of PROTOTYPE_NAMES) {
        const login = await call(t.app, 'POST', '/api/auth/login', {
          body: `{"${name}": 1, "email": "a@b.co", "password": "x"}`,
        });
        expectEnvelope(login, 422, 'validation_error');
        expect(login.body.details).toEqual({ [name]: ['is not an allowed field.'] });

        const voter = await call(t.app, 'POST', '/api/voters', {
          token: owner.token,
          body: `{"name": "A", "phone": "+919812345678", "${name}": "x"}`,
        });
        expectEnvelope(voter, 422, 'validation_error');
        expect(Object.keys(voter.body.details)).toEqual([name]);

        // Missing fields and a prototype name together: both named.
        const both = await call(t.app, 'POST', '/api/auth/register', { body: `{"${name}": {}}` });
        expectEnvelope(both, 422, 'validation_error');
        expect(both.body.details[name]).toEqual(['is not an allowed field.']);
        expect(both.body.details.email).toEqual(['is required.']);
      }
    });

    it('list items with their own valueOf or toString are a 422, not a 500 (Ajv compares unique items with them)', async () => {
      for (const events of [
        [{ valueOf: 'a' }, { valueOf: 'b' }],
        [{ toString: 'a' }, 'grievance.created', { toString: 'b' }],
        [{ a: 1 }, 'grievance.created', { valueOf: 'f]', hasOwnProperty: 'x' }],
      ]) {
        const res = await call(t.app, 'POST', '/api/webhooks', {
          token: owner.token,
          body: { url: 'https://example.com/hook', events },
        });
        expectEnvelope(res, 422, 'validation_error');
      }
    });

    it('a 404 for a very long path stays small (the path is cut in the message)', async () => {
      const res = await call(t.app, 'POST', `/api/webhooks/../deliveries/${'x'.repeat(50_000)}/retry`, {
        token: owner.token,
      });
      expectEnvelope(res, 404, 'not_found');
      expect(JSON.stringify(res.body).length).toBeLessThan(1000);
    });

    it('export filters with constructor or __proto__ keys are a 422 naming them', async () => {
      for (const [filters, field] of [
        ['{"constructor":"x"}', 'filters.constructor'],
        ['{"toString":"x"}', 'filters.toString'],
        ['{"__proto__":{"polluted":true}}', 'filters.__proto__'],
        ['{"ward":"1","__proto__":"x"}', 'filters.__proto__'],
      ] as const) {
        const res = await call(t.app, 'GET', `/api/voters/export?filters=${encodeURIComponent(filters)}`, {
          token: owner.token,
        });
        expectEnvelope(res, 422, 'validation_error');
        expect(Object.keys(res.body.details)).toEqual([field]);
      }
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    });

    it('200,000 bad recipients (400 KB) get a small 422 at once, and the server lives on', async () => {
      const started = Date.now();
      const res = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Hello', recipients: new Array(200_000).fill(1) },
      });
      expectEnvelope(res, 422, 'validation_error');
      expect(res.raw.length).toBeLessThan(2_000);
      expect(res.body.details).toEqual({ 'recipients.0': ['must be a string.'] });
      expect(res.body.message).toMatch(/only its first problem/);
      expect(Date.now() - started).toBeLessThan(2_000);
      expect((await call(t.app, 'GET', '/api/healthz')).status).toBe(200);
    });

    it('10,000 recipients that are not phones: the 422 lists the first 50 and counts the rest', async () => {
      const res = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Hello', recipients: new Array(10_000).fill('not a phone') },
      });
      expectEnvelope(res, 422, 'validation_error');
      expect(Object.keys(res.body.details)).toHaveLength(50);
      expect(res.body.details['recipients.0']).toBeDefined();
      expect(res.body.message).toMatch(/^The request has 10000 invalid fields; details lists the first 50: /);
      expect(res.raw.length).toBeLessThan(10_000);
    });

    it('unknown-field 422s are bounded: 80,000 unknown fields answer a small 422', async () => {
      const body: Record<string, number> = { email: 1 } as never;
      for (let i = 0; i < 80_000; i++) body[`f${i}`] = 1;
      const res = await call(t.app, 'POST', '/api/auth/login', { body });
      expectEnvelope(res, 422, 'validation_error');
      expect(res.raw.length).toBeLessThan(2_000);
      expect(Object.keys(res.body.details)).toHaveLength(1);
    });

    it('a small body with many problems lists the first 50 in details and counts the rest in the message', async () => {
      const body: Record<string, number> = {};
      for (let i = 0; i < 70; i++) body[`extra_${i}`] = 1;
      const res = await call(t.app, 'POST', '/api/auth/login', { body });
      expectEnvelope(res, 422, 'validation_error');
      expect(Object.keys(res.body.details)).toHaveLength(50);
      // email, password and 70 unknown fields.
      expect(res.body.message).toMatch(/^The request has 72 invalid fields; details lists the first 50: /);
    });

    it('a huge field name is cut to 100 characters in the answer', async () => {
      const name = 'x'.repeat(100_000);
      const res = await call(t.app, 'POST', '/api/auth/login', {
        body: { email: 'a@b.co', password: 'x', [name]: 1 },
      });
      expectEnvelope(res, 422, 'validation_error');
      expect(res.raw.length).toBeLessThan(1_000);
      expect(Object.keys(res.body.details)).toEqual([`${'x'.repeat(100)}…`]);
    });

    it('every operation answers an unknown query parameter with a 422 naming it (from the route table)', async () => {
      const doc = t.app.swagger() as { paths: Record<string, Record<string, { requestBody?: unknown }>> };
      let checked = 0;
      for (const [path, operations] of Object.entries(doc.paths)) {
        // A channel account's callbacks take whatever fields the provider adds (Exotel's greeting passes a dozen).
        if (path.startsWith('/api/providers/{provider}/')) continue;
        for (const [method, operation] of Object.entries(operations)) {
          const url = `${path.replace('{import_id}', 'imp_1').replace(/\{[^}]+\}/g, '1')}?zzz_unknown=1`;
          const res = await call(t.app, method.toUpperCase(), url, {
            token: owner.token,
            ...(operation.requestBody ? { body: {} } : {}),
          });
          if (operation.requestBody) {
            // The body is checked first; a route whose body is optional gets to the query.
            expect([400, 422], `${method} ${path}`).toContain(res.status);
            if (
              res.status === 422 &&
              Object.keys(res.body.details).length === 1 &&
              res.body.details.zzz_unknown
            )
              checked += 1;
            continue;
          }
          expectEnvelope(res, 422, 'validation_error');
          expect(res.body.details, `${method} ${path}`).toEqual({
            zzz_unknown: ['is not an allowed field.'],
          });
          checked += 1;
        }
      }
      expect(checked).toBeGreaterThan(20);

      // With a valid body too, and nothing is done.
      const send = await call(t.app, 'POST', '/api/messages/send?dry=1', {
        token: owner.token,
        body: { channel: 'sms', to: '+919812345678', message: 'Hello' },
      });
      expectEnvelope(send, 422, 'validation_error');
      expect(send.body.details).toEqual({ dry: ['is not an allowed field.'] });
      expect(send.body.message).toBe('The request has invalid fields: dry.');
      const history = await call(t.app, 'GET', '/api/messages/history', { token: owner.token });
      expect(history.body.data.total).toBe(0);
      // The voter import reads its multipart body itself; its query string is checked all the same.
      const before = await call(t.app, 'GET', '/api/voters', { token: owner.token });
      const { payload, contentType } = multipartBody([
        { name: 'file', content: 'name,phone\nAsha,+919812345678\n' },
      ]);
      for (const name of ['zzz_unknown', 'constructor']) {
        const imported = await t.app.inject({
          method: 'POST',
          url: `/api/voters/import?${name}=1`,
          headers: { authorization: `Bearer ${owner.token}`, 'content-type': contentType },
          payload,
        });
        expect(imported.statusCode, imported.body).toBe(422);
        expect(imported.json().details).toEqual({ [name]: ['is not an allowed field.'] });
      }
      const after = await call(t.app, 'GET', '/api/voters', { token: owner.token });
      expect(after.body.data.total).toBe(before.body.data.total);
      // Known parameters still work, repeated or not.
      expect((await call(t.app, 'GET', '/api/voters?page=1&per_page=5', { token: owner.token })).status).toBe(
        200,
      );
      expect((await call(t.app, 'GET', '/api/healthz?', {})).status).toBe(200);
    });

    it('a path segment over 2,048 characters, or not UTF-8, is a 400 bad_request with the envelope', async () => {
      const long = await call(t.app, 'GET', `/api/voters/${'1'.repeat(2049)}`, { token: owner.token });
      expectEnvelope(long, 400, 'bad_request');
      expect(long.raw).not.toContain('1'.repeat(2049));
      expect(long.body.message).toMatch(/longer than 2,048 characters/);
      const id = await call(t.app, 'GET', `/api/voters/${'1'.repeat(2048)}`, { token: owner.token });
      expectEnvelope(id, 422, 'validation_error');

      for (const path of ['/api/voters/%ED%A0%80', '/api/voters/%FF', '/api/nowhere/%C0%AF']) {
        const bad = await call(t.app, 'GET', path, { token: owner.token });
        expectEnvelope(bad, 400, 'bad_request');
        expect(bad.body.message).toMatch(/not UTF-8/);
      }
      const own = await call(t.app, 'GET', '/api/voters/%ED%A0%80', {
        headers: { 'x-request-id': 'mine-1' },
      });
      expect(own.headers['x-request-id']).toBe('mine-1');
    });

    it("Fastify's own errors all answer the envelope with X-Request-Id", async () => {
      const login = '/api/auth/login';
      const cases: Array<[Answer, number, string]> = [
        [await call(t.app, 'POST', login, { body: '{"email": ' }), 400, 'bad_request'],
        [
          await call(t.app, 'POST', login, {
            body: '[1, 2',
            headers: { 'content-type': 'application/json' },
          }),
          400,
          'bad_request',
        ],
        [
          await call(t.app, 'POST', login, { body: 'a=b', headers: { 'content-type': 'text/plain' } }),
          400,
          'bad_request',
        ],
        [
          await call(t.app, 'POST', login, { body: 'a=b', headers: { 'content-type': 'nonsense' } }),
          400,
          'bad_request',
        ],
        [
          await call(t.app, 'POST', login, { body: '', headers: { 'content-type': 'application/json' } }),
          422,
          'validation_error',
        ],
        [await call(t.app, 'POST', login, { body: '"just a string"' }), 422, 'validation_error'],
        [await call(t.app, 'POST', login, { body: 'null' }), 422, 'validation_error'],
        [
          await call(t.app, 'POST', login, { body: `{"p": "${'x'.repeat(1_100_000)}"}` }),
          413,
          'payload_too_large',
        ],
        [
          await call(t.app, 'POST', login, { body: '{"constructor": {"prototype": {}}}' }),
          400,
          'bad_request',
        ],
        [await call(t.app, 'GET', '/api/nowhere'), 404, 'not_found'],
        [await call(t.app, 'DELETE', '/api/healthz'), 405, 'method_not_allowed'],
        [await call(t.app, 'PATCH', '/api/voters'), 405, 'method_not_allowed'],
        [await call(t.app, 'OPTIONS', '/api/voters'), 405, 'method_not_allowed'],
      ];
      for (const [res, status, code] of cases) expectEnvelope(res, status, code);
    });
  });
}
