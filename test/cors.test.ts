import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.ts';
import { buildTestApp, call, dialects, register, type TestApp } from './helpers.ts';

const FRONT = 'https://app.example.org';
const OTHER = 'https://evil.example.com';

function preflight(t: TestApp, origin: string, url = '/api/voters') {
  return t.app.inject({
    method: 'OPTIONS',
    url,
    headers: {
      origin,
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization, content-type',
    },
  });
}

describe('CORS_ORIGINS is checked at start', () => {
  it('takes *, or a list of origins, and names a bad one', () => {
    expect(loadConfig({}).corsOrigins).toBeUndefined();
    expect(loadConfig({ CORS_ORIGINS: '*' }).corsOrigins).toBe('*');
    expect(loadConfig({ CORS_ORIGINS: `${FRONT}, http://localhost:5173` }).corsOrigins).toEqual([
      FRONT,
      'http://localhost:5173',
    ]);
    for (const bad of ['app.example.org', `${FRONT}/`, `${FRONT}/path`, 'ftp://x.org', `${FRONT},*`]) {
      expect(() => loadConfig({ CORS_ORIGINS: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ CORS_ORIGINS: bad })).toThrow(/CORS_ORIGINS/);
    }
  });
});

for (const dialect of dialects) {
  describe(`CORS unset (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
    });
    afterAll(async () => t.close());

    it('adds no CORS header and answers no preflight', async () => {
      const res = await call(t.app, 'GET', '/api/healthz', { headers: { origin: FRONT } });
      expect(res.status).toBe(200);
      expect(Object.keys(res.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
      const pre = await preflight(t, FRONT);
      expect(pre.statusCode).toBe(405); // OPTIONS is not a method of the route
      expect(pre.headers['access-control-allow-origin']).toBeUndefined();
    });
  });

  describe(`CORS for a list of origins (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect, { CORS_ORIGINS: `${FRONT},http://localhost:5173` });
    });
    afterAll(async () => t.close());

    it('answers the preflight of an allowed origin with the methods and headers the API takes', async () => {
      const pre = await preflight(t, FRONT);
      expect(pre.statusCode).toBe(204);
      expect(pre.headers['access-control-allow-origin']).toBe(FRONT);
      expect(pre.headers['access-control-allow-methods']).toContain('POST');
      expect(String(pre.headers['access-control-allow-headers'])).toContain('authorization');
      expect(String(pre.headers['access-control-allow-headers'])).toContain('content-type');
      expect(pre.headers['access-control-allow-credentials']).toBeUndefined();
      expect(pre.headers.vary).toContain('Origin');
    });

    it('lets a browser send Prefer: respond-async and read the import job Location', async () => {
      const pre = await preflight(t, FRONT, '/api/voters/import');
      expect(pre.statusCode).toBe(204);
      expect(String(pre.headers['access-control-allow-headers']).split(', ')).toContain('prefer');
      const owner = await register(t.app);
      const ok = await call(t.app, 'GET', '/api/voters', { token: owner.token, headers: { origin: FRONT } });
      const exposed = String(ok.headers['access-control-expose-headers']).split(', ');
      expect(exposed).toContain('location');
      expect(exposed).toContain('preference-applied');
    });

    it('adds the headers to real answers (errors too) for allowed origins only', async () => {
      const owner = await register(t.app);
      const ok = await call(t.app, 'GET', '/api/voters', { token: owner.token, headers: { origin: FRONT } });
      expect(ok.status).toBe(200);
      expect(ok.headers['access-control-allow-origin']).toBe(FRONT);
      expect(String(ok.headers['access-control-expose-headers'])).toContain('x-request-id');
      const denied = await call(t.app, 'GET', '/api/voters', {
        headers: { origin: 'http://localhost:5173' },
      });
      expect(denied.status).toBe(401);
      expect(denied.headers['access-control-allow-origin']).toBe('http://localhost:5173');

      const other = await call(t.app, 'GET', '/api/voters', {
        token: owner.token,
        headers: { origin: OTHER },
      });
      expect(other.status).toBe(200);
      expect(other.headers['access-control-allow-origin']).toBeUndefined();
      const otherPre = await preflight(t, OTHER);
      expect(otherPre.statusCode).toBe(405);
      expect(otherPre.headers['access-control-allow-origin']).toBeUndefined();
      // No Origin header (a server-side client): nothing to add.
      const plain = await call(t.app, 'GET', '/api/healthz');
      expect(plain.headers['access-control-allow-origin']).toBeUndefined();
    });
  });

  describe(`CORS for any origin (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect, { CORS_ORIGINS: '*' });
    });
    afterAll(async () => t.close());

    it('answers * to every origin', async () => {
      const pre = await preflight(t, OTHER, '/api/auth/login');
      expect(pre.statusCode).toBe(204);
      expect(pre.headers['access-control-allow-origin']).toBe('*');
      const res = await call(t.app, 'GET', '/api/healthz', { headers: { origin: OTHER } });
      expect(res.headers['access-control-allow-origin']).toBe('*');
    });
  });
}
