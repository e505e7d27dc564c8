import { type AddressInfo, connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Account,
  type Answer,
  buildTestApp,
  call,
  dialects,
  register,
  type TestApp,
  uniqueEmail,
  uniquePhone,
} from './helpers.ts';

function expectNoStore(res: Answer, what: string): void {
  expect(res.headers['x-content-type-options'], what).toBe('nosniff');
  expect(res.headers['cache-control'], what).toBe('no-store');
}

for (const dialect of dialects) {
  describe(`security headers (${dialect})`, () => {
    let t: TestApp;
    let owner: Account;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
      owner = await register(t.app);
    });
    afterAll(() => t.close());

    it('answers that carry a token or personal data are nosniff and no-store', async () => {
      const password = 'correct horse battery';
      const email = uniqueEmail('sec');
      const answers: Array<[string, Answer]> = [
        [
          'register',
          await call(t.app, 'POST', '/api/auth/register', {
            body: { name: 'B', email, password, phone: uniquePhone() },
          }),
        ],
        ['login', await call(t.app, 'POST', '/api/auth/login', { body: { email, password } })],
        ['user', await call(t.app, 'GET', '/api/user', { token: owner.token })],
        ['voters', await call(t.app, 'GET', '/api/voters', { token: owner.token })],
        ['v1 voters', await call(t.app, 'GET', '/api/v1/voters', { token: owner.token })],
        ['export', await call(t.app, 'GET', '/api/voters/export', { token: owner.token })],
        ['webhook secret', await call(t.app, 'POST', '/api/webhooks', { token: owner.token, body: {} })],
        ['no token', await call(t.app, 'GET', '/api/voters')],
        ['422', await call(t.app, 'POST', '/api/auth/login', { body: {} })],
        ['404', await call(t.app, 'GET', '/api/nowhere')],
        ['405', await call(t.app, 'DELETE', '/api/healthz')],
        ['bad url', await call(t.app, 'GET', '/api/voters/%ED%A0%80')],
        ['long id', await call(t.app, 'GET', `/api/voters/${'9'.repeat(120)}`)],
        ['health', await call(t.app, 'GET', '/api/healthz')],
      ];
      expect(answers[0]![1].status).toBe(201);
      expect(answers[1]![1].status).toBe(200);
      for (const [what, res] of answers) expectNoStore(res, what);
    });

    it('the API reference has a Content-Security-Policy and may not be framed; its assets load under it', async () => {
      const page = await call(t.app, 'GET', '/api/docs/');
      const html = page.raw;
      expect(page.status).toBe(200);
      expect(page.headers['x-content-type-options']).toBe('nosniff');
      expect(page.headers['x-frame-options']).toBe('DENY');
      const csp = String(page.headers['content-security-policy']);
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("object-src 'none'");
      // Everything the page loads is its own (CSP 'self'), and it has no inline script.
      const sources = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
      expect(sources.length).toBeGreaterThan(3);
      expect(html).not.toMatch(/<script>(?!\s*<\/script>)|<script(?![^>]*\bsrc=)[^>]*>\s*\S/);
      for (const source of sources) {
        expect(source, source).not.toMatch(/^(https?:)?\/\//);
        const asset = await call(t.app, 'GET', new URL(source, 'http://x/api/docs/').pathname);
        expect(asset.status, source).toBe(200);
        expect(asset.headers['content-security-policy'], source).toBe(csp);
        expect(asset.headers['x-content-type-options'], source).toBe('nosniff');
      }
      expect((await call(t.app, 'GET', '/api/docs/json')).status).toBe(200);
      const redirect = await call(t.app, 'GET', '/api/docs');
      expect(redirect.headers['content-security-policy']).toBe(csp);
    });
  });
}

describe('security headers on what Node refuses before the app', () => {
  it('a request that is not HTTP gets nosniff and no-store too', async () => {
    const t = await buildTestApp('sqlite');
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = t.app.server.address() as AddressInfo;
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => socket.write('NOT HTTP AT ALL\r\n\r\n'));
      let data = '';
      socket.on('data', (chunk) => (data += chunk.toString()));
      socket.on('end', () => resolve(data));
      socket.on('error', reject);
    });
    await t.close();
    expect(answer).toMatch(/^HTTP\/1\.1 400/);
    expect(answer).toMatch(/\r\nX-Content-Type-Options: nosniff\r\n/i);
    expect(answer).toMatch(/\r\nCache-Control: no-store\r\n/i);
  });
});
