/**
 * No log line carries a callback token, an unsubscribe token, a phone number or an email address (the
 * contract's fourth part, "Seams"), outside the deployment's sandbox provider's message lines: logged with the
 * process's own logger settings (loggerOptions), at the most talkative level.
 */
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, loggedPath, loggerOptions } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { connect, type Db } from '../src/db/connect.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { channels } from '../src/providers/provider.ts';
import { SandboxProvider } from '../src/providers/sandbox/index.ts';
import { call, register, uniquePhone } from './helpers.ts';

describe('log lines (sqlite, LOG_LEVEL=trace)', () => {
  const lines: string[] = [];
  let app: Awaited<ReturnType<typeof buildApp>>;
  let db: Db;
  let log: pino.Logger;
  beforeAll(async () => {
    const config = loadConfig({
      DATABASE_URL: 'sqlite::memory:',
      LOG_LEVEL: 'trace',
      QUIET_HOURS: '',
      RATE_LIMIT_AUTH_PER_MIN: '1000',
      RATE_LIMIT_AUTH_IP_PER_MIN: '1000',
      PUBLIC_BASE_URL: 'https://ces.example.org',
    });
    db = connect(config.databaseUrl);
    await migrateToLatest(db);
    log = pino(loggerOptions('trace') as pino.LoggerOptions, {
      write: (line: string) => void lines.push(line),
    });
    const providers = Object.fromEntries(
      channels.map((c) => [c, new SandboxProvider(c, log, 0)]),
    ) as unknown as Record<(typeof channels)[number], SandboxProvider>;
    app = await buildApp({
      config,
      db,
      providers,
      loggerInstance: log,
      rateLimitPrefix: `t:${randomUUID()}`,
    });
  });
  afterAll(async () => {
    await app?.close();
    await db?.close();
  });

  it('paths lose their callback and unsubscribe tokens, phones and emails; a workspace sandbox account logs no address or body', async () => {
    const owner = await register(app);
    const created = await call(app, 'POST', '/api/channel-accounts', {
      token: owner.token,
      body: {
        name: 'MSG91',
        provider: 'msg91',
        settings: { sender: 'CESOFC' },
        credentials: { authkey: 'msg91-authkey-0123456789' },
      },
    });
    expect(created.status).toBe(201);
    const delivery = new URL(created.body.data.callback_urls.delivery as string).pathname;
    const token = delivery.split('/')[5]!;
    expect(token.length).toBeGreaterThan(20);
    await call(app, 'POST', delivery, { body: { data: '[]' } });
    // A segment too many (a 404): logged without its token all the same.
    expect((await call(app, 'POST', `${delivery}/extra`, { body: { data: '[]' } })).status).toBe(404);
    expect((await call(app, 'GET', `${delivery}/a/b`)).status).toBe(404);
    await call(app, 'GET', '/api/unsubscribe/c2VjcmV0LWFkZHJlc3NAZXhhbXBsZS5vcmc');
    const phone = uniquePhone();
    await call(app, 'GET', `/api/opt-outs/${encodeURIComponent(phone)}`, { token: owner.token });
    await call(app, 'GET', '/api/opt-outs/asha.rao%40example.org', { token: owner.token });

    // A workspace's own sandbox account: its message line names neither the address nor the body.
    const sandbox = await call(app, 'POST', '/api/channel-accounts', {
      token: owner.token,
      body: { name: 'Test', provider: 'sandbox', channels: ['sms'], default_for: ['sms'] },
    });
    expect(sandbox.status).toBe(201);
    const to = uniquePhone();
    const sent = await call(app, 'POST', '/api/messages/send', {
      token: owner.token,
      body: { channel: 'sms', to, message: 'A private body 4729' },
    });
    expect(sent.status).toBe(201);

    const all = lines.join('\n');
    expect(all).toContain('/api/providers/msg91/');
    expect(all).not.toContain(token);
    expect(all).not.toContain('c2VjcmV0LWFkZHJlc3NAZXhhbXBsZS5vcmc');
    expect(all).not.toContain(phone);
    expect(all).not.toContain(encodeURIComponent(phone));
    expect(all).not.toContain('asha.rao');
    expect(all).not.toContain(to);
    expect(all).not.toContain('A private body 4729');
    expect(all).toContain('sandbox message');
  });

  it('loggedPath keeps ids and replaces secrets', () => {
    expect(loggedPath('/api/voters/12345678?q=Asha')).toBe('/api/voters/12345678');
    expect(loggedPath('/api/providers/exotel/cha_12/AbCdEf123/delivery')).toBe(
      '/api/providers/exotel/cha_12/:token/delivery',
    );
    expect(loggedPath('/api/providers/exotel/cha_12/AbCdEf123/delivery/more')).toBe(
      '/api/providers/exotel/cha_12/:token/delivery/more',
    );
    expect(loggedPath('/api/providers/twilio/status')).toBe('/api/providers/twilio/status');
    expect(loggedPath('/api/v1/unsubscribe/abc.def')).toBe('/api/v1/unsubscribe/:token');
    expect(loggedPath('/api/opt-outs/%2B919812345678')).toBe('/api/opt-outs/:token');
    expect(loggedPath('/api/opt-outs/a%40b.in')).toBe('/api/opt-outs/:token');
  });
});
