import { type AddressInfo, connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, call, dereference, dialects, expectError, register, type TestApp } from './helpers.ts';

for (const dialect of dialects) {
  describe(`health, errors and versioning (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
      // A route that fails unexpectedly, to see what a 500 shows.
      t.app.get('/api/test-boom', { config: { permission: 'public' } }, async () => {
        throw new Error('secret internal detail');
      });
    });
    afterAll(() => t.close());

    it('GET /api/healthz checks the database', async () => {
      const res = await call(t.app, 'GET', '/api/healthz');
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ success: true, data: { status: 'ok', database: 'ok', dialect } });
    });

    it('every response carries X-Request-Id, echoing a sane one and replacing a hostile one', async () => {
      const own = await call(t.app, 'GET', '/api/healthz', { headers: { 'x-request-id': 'abc-123' } });
      expect(own.headers['x-request-id']).toBe('abc-123');
      const hostile = await call(t.app, 'GET', '/api/healthz', {
        headers: { 'x-request-id': 'a b\u0000<script>' },
      });
      expect(hostile.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      const missing = await call(t.app, 'GET', '/api/nowhere');
      expect(missing.headers['x-request-id']).toBeTruthy();
    });

    it('unknown paths are 404 not_found and a wrong method is 405 with Allow', async () => {
      expectError(await call(t.app, 'GET', '/api/nowhere'), 404, 'not_found');
      expectError(await call(t.app, 'GET', '/nowhere'), 404, 'not_found');
      const wrongMethod = await call(t.app, 'DELETE', '/api/healthz');
      expectError(wrongMethod, 405, 'method_not_allowed');
      expect(wrongMethod.headers.allow).toBe('GET');
    });

    it('serves every route under /api and /api/v1; /api/v2 is 404', async () => {
      const account = await register(t.app);
      expect((await call(t.app, 'GET', '/api/v1/healthz')).status).toBe(200);
      const v1 = await call(t.app, 'GET', '/api/v1/user', { token: account.token });
      expect(v1.status).toBe(200);
      expect(v1.body.data.user.id).toBe(account.user.id);
      expectError(await call(t.app, 'GET', '/api/v2/healthz'), 404, 'not_found');
      expectError(await call(t.app, 'GET', '/api/v2/user', { token: account.token }), 404, 'not_found');
      expect(v1.headers.deprecation).toBeUndefined();
    });

    it('answers malformed JSON, a wrong content type and hostile JSON with 400 bad_request', async () => {
      expectError(await call(t.app, 'POST', '/api/auth/login', { body: '{"email": ' }), 400, 'bad_request');
      expectError(
        await call(t.app, 'POST', '/api/auth/login', {
          body: 'email=a&password=b',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        }),
        400,
        'bad_request',
      );
      expectError(
        await call(t.app, 'POST', '/api/auth/login', {
          body: 'hello',
          headers: { 'content-type': 'text/plain' },
        }),
        400,
        'bad_request',
      );
      expectError(
        await call(t.app, 'POST', '/api/auth/login', {
          body: '{"__proto__": {"admin": true}, "email": "a@b.co", "password": "x"}',
        }),
        400,
        'bad_request',
      );
    });

    it('answers an oversized body with 413 payload_too_large', async () => {
      const res = await call(t.app, 'POST', '/api/auth/login', {
        body: { email: 'a@b.co', password: 'x'.repeat(2 * 1024 * 1024) },
      });
      expectError(res, 413, 'payload_too_large');
    });

    it('every list takes pages up to 1,000,000,000: past the end is empty with true totals, beyond is 422', async () => {
      const own = await buildTestApp(dialect, { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
      try {
        const owner = await register(own.app);
        const made = await call(own.app, 'POST', '/api/voters', {
          token: owner.token,
          body: { name: 'Kumar Page', phone: '9876500011', booth: '4' },
        });
        expect(made.status).toBe(201);
        const hook = await call(own.app, 'POST', '/api/webhooks', {
          token: owner.token,
          body: { url: 'http://127.0.0.1:9/never-called', events: ['grievance.created'] },
        });
        expect(hook.status).toBe(201);
        for (const list of [
          '/api/users?',
          '/api/voters?',
          '/api/voters?search=kumar&',
          '/api/voters?booth=4&search=ku&',
          '/api/segments?',
          '/api/messages/history?',
          '/api/grievances?',
          '/api/payments?',
          '/api/campaigns?',
          '/api/webhooks?',
          `/api/webhooks/${hook.body.data.id}/deliveries?`,
        ]) {
          const last = await call(own.app, 'GET', `${list}page=1000000000&per_page=100`, {
            token: owner.token,
          });
          expect({ list, status: last.status }).toEqual({ list, status: 200 });
          expect(last.body.data.data).toEqual([]);
          expect(last.body.data.current_page).toBe(1_000_000_000);
          for (const page of ['1000000001', '99999999999999999999', '1e30']) {
            const beyond = await call(own.app, 'GET', `${list}page=${page}`, { token: owner.token });
            expectError(beyond, 422, 'validation_error');
            expect(beyond.body.details).toHaveProperty('page');
          }
        }
        const voters = await call(own.app, 'GET', '/api/voters?search=kumar&page=1000000000', {
          token: owner.token,
        });
        expect(voters.body.data).toMatchObject({ total: 1, last_page: 1 });
      } finally {
        await own.close();
      }
    });

    it('a NUL character anywhere is a 422 naming the field, and changes nothing', async () => {
      const owner = await register(t.app);
      const made = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Kumar Nul', phone: '9876500012' },
      });
      expect(made.status).toBe(201);
      const cases: Array<[string, string, unknown, string]> = [
        ['GET', '/api/voters?search=a%00b', undefined, 'search'],
        ['GET', '/api/voters?booth=%00', undefined, 'booth'],
        ['GET', '/api/grievances?category=x%00', undefined, 'category'],
        [
          'GET',
          `/api/voters/export?filters=${encodeURIComponent('{"search":"a\\u0000"}')}`,
          undefined,
          'filters.search',
        ],
        ['PUT', `/api/voters/${made.body.data.id}`, { name: 'Kumar\u0000Nul' }, 'name'],
        ['POST', '/api/segments', { name: 'S', filters: { ward: '\u0000' } }, 'filters.ward'],
        ['POST', '/api/grievances', { title: 'Water\u0000' }, 'title'],
        [
          'POST',
          '/api/messages/send',
          { channel: 'sms', to: '+919876500012', message: 'hi\u0000' },
          'message',
        ],
      ];
      for (const [method, url, body, field] of cases) {
        const res = await call(t.app, method as 'GET', url, { token: owner.token, body });
        expectError(res, 422, 'validation_error');
        expect(res.body.details).toEqual({ [field]: ['must not contain the NUL character (U+0000).'] });
      }
      const voter = await call(t.app, 'GET', `/api/voters/${made.body.data.id}`, { token: owner.token });
      expect(voter.body.data.name).toBe('Kumar Nul');
      // A body nested thousands of levels deep is still an ordinary client error.
      const deep = await t.app.inject({
        method: 'POST',
        url: '/api/segments',
        headers: { authorization: `Bearer ${owner.token}`, 'content-type': 'application/json' },
        payload: `${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}`,
      });
      expect([400, 422]).toContain(deep.statusCode);
    });

    it('an id beyond what JavaScript holds exactly is a 422 naming the field, in a path or a body', async () => {
      const owner = await register(t.app);
      const huge = 9223372036854775808;
      const cases: Array<[string, string, unknown, string]> = [
        ['GET', '/api/voters/9223372036854775808', undefined, 'id'],
        [
          'POST',
          '/api/messages/broadcast',
          { channel: 'sms', segment_id: huge, message: 'hi' },
          'segment_id',
        ],
        [
          'POST',
          '/api/campaigns',
          { name: 'C', channel: 'sms', message: 'hi', segment_id: huge },
          'segment_id',
        ],
        ['POST', '/api/grievances', { title: 'Water', voter_id: huge }, 'voter_id'],
      ];
      for (const [method, url, body, field] of cases) {
        const res = await call(t.app, method as 'GET', url, { token: owner.token, body });
        expectError(res, 422, 'validation_error');
        expect(Object.keys(res.body.details)).toContain(field);
      }
    });

    it('a 500 is server_error with the request id and no internals', async () => {
      const res = await call(t.app, 'GET', '/api/test-boom', { headers: { 'x-request-id': 'req-500' } });
      expectError(res, 500, 'server_error');
      expect(res.raw).not.toContain('secret internal detail');
      expect(res.body.details).toEqual({ request_id: 'req-500' });
    });

    it('publishes an OpenAPI 3.1 document of every route and a browsable reference', async () => {
      const res = await call(t.app, 'GET', '/api/openapi.json');
      expect(res.status).toBe(200);
      expect(res.body.openapi).toBe('3.1.0');
      const paths = Object.keys(res.body.paths);
      for (const p of [
        '/api/healthz',
        '/api/auth/register',
        '/api/auth/login',
        '/api/auth/logout',
        '/api/auth/send-otp',
        '/api/auth/verify-otp',
        '/api/user',
        '/api/users',
      ]) {
        expect(paths).toContain(p);
      }
      const login = dereference(res.body).paths['/api/auth/login'].post;
      expect(login.requestBody.content['application/json'].schema.properties.email).toBeDefined();
      expect(login.responses['200']).toBeDefined();
      expect(login.responses['422'].content['application/json'].schema.properties.error_code).toBeDefined();
      expect(res.body.paths['/api/users'].post.security).toEqual([{ bearerAuth: [] }]);
      const docs = await call(t.app, 'GET', '/api/docs');
      expect(docs.status).toBe(200);
      expect(docs.headers['content-type']).toMatch(/text\/html/);
      expect(docs.raw).toContain('swagger-ui');
      expect((await call(t.app, 'GET', '/api/docs/static/swagger-ui.css')).status).toBe(200);
    });
  });

  describe(`health when the database is gone (${dialect})`, () => {
    it('answers 503 service_unavailable', async () => {
      const t = await buildTestApp(dialect);
      await t.app.ready();
      await t.db.close();
      const res = await call(t.app, 'GET', '/api/healthz');
      expectError(res, 503, 'service_unavailable');
      await t.app.close();
    });
  });
}

describe('deprecated versions', () => {
  it('send Deprecation, Sunset and Link headers', async () => {
    const t = await buildTestApp('sqlite', {
      API_DEPRECATED_VERSIONS: 'v1',
      API_DEPRECATION_DATE: '2027-01-01T00:00:00Z',
      API_SUNSET_DATE: '2027-07-01T00:00:00Z',
      API_MIGRATION_GUIDE_URL: 'https://docs.example.com/migrate-to-v2',
    });
    try {
      for (const url of ['/api/v1/healthz', '/api/healthz']) {
        const res = await call(t.app, 'GET', url);
        expect(res.status).toBe(200);
        expect(res.headers.deprecation).toBe(`@${Date.parse('2027-01-01T00:00:00Z') / 1000}`);
        expect(res.headers.sunset).toBe('Thu, 01 Jul 2027 00:00:00 GMT');
        expect(res.headers.link).toBe(
          '<https://docs.example.com/migrate-to-v2>; rel="deprecation"; type="text/html"',
        );
      }
    } finally {
      await t.close();
    }
  });
});

describe('requests that Node refuses before the app sees them', () => {
  /** Writes `raw` to a real socket of the listening app and reads the whole answer. */
  async function rawExchange(port: number, raw: string): Promise<string> {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => {}); // the server closes after answering
    socket.write(raw);
    await new Promise((resolve) => socket.once('close', resolve));
    return Buffer.concat(chunks).toString('utf8');
  }

  it('get the error envelope: headers over 16 KB, and a request line that is not HTTP', async () => {
    const t = await buildTestApp('sqlite');
    try {
      await t.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = t.app.server.address() as AddressInfo;
      const cases: [string, string][] = [
        [
          `GET /api/healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
          'The request headers are too large: keep them under 16 KB in all.',
        ],
        ['NOT HTTP AT ALL\r\n\r\n', 'The request is not valid HTTP.'],
      ];
      for (const [request, message] of cases) {
        const answer = await rawExchange(port, request);
        const [head, body] = answer.split('\r\n\r\n');
        expect(head).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
        expect(head).toContain('Content-Type: application/json; charset=utf-8');
        expect(JSON.parse(body ?? '')).toEqual({ success: false, error_code: 'bad_request', message });
      }
      // The server carries on.
      expect((await fetch(`http://127.0.0.1:${port}/api/healthz`)).status).toBe(200);
    } finally {
      await t.close();
    }
  });
});
