import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Account,
  type Answer,
  buildTestApp,
  call,
  dialects,
  expectError,
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
  });
}
