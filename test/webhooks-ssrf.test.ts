import { describe, expect, it, afterAll, beforeAll } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.ts';
import { checkDestination, isBlockedAddress, systemResolver } from '../src/modules/webhooks/webhooks.ssrf.ts';
import { newWebhookSecret, webhookSecretBox } from '../src/modules/webhooks/webhooks.secrets.ts';
import { buildTestApp, call, dialects, expectError, register, type TestApp } from './helpers.ts';
import { type Receiver, startReceiver, tableResolver, workerFor } from './webhook-receivers.ts';

const PUBLIC = '93.184.215.14';

describe('SSRF address rules', () => {
  it('blocks loopback, private, link-local, unique-local, IPv4-mapped and other non-public addresses', () => {
    for (const address of [
      '127.0.0.1',
      '127.255.255.254',
      '10.0.0.1',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '224.0.0.1',
      '255.255.255.255',
      '::1',
      '::',
      'fe80::1',
      'fe80::1%eth0',
      'fc00::1',
      'fd12:3456::1',
      '::ffff:127.0.0.1',
      '::ffff:8.8.8.8',
      '::ffff:a00:1',
      'ff02::1',
      // IPv6 forms that embed an IPv4 address: IPv4-compatible, SIIT-translated, 6to4, NAT64, Teredo.
      '::7f00:1',
      '::127.0.0.1',
      '::a00:1',
      '::ffff:0:7f00:1',
      '::ffff:0:a9fe:a9fe',
      '2002:7f00:1::',
      '2002:a9fe:a9fe::1',
      '64:ff9b:1::7f00:1',
      '64:ff9b::7f00:1',
      '2001:0:4136:e378:8000:63bf:80ff:fffe',
      'not-an-address',
    ]) {
      expect(isBlockedAddress(address), address).toBe(true);
    }
    for (const address of [
      '8.8.8.8',
      PUBLIC,
      '172.32.0.1',
      '192.169.0.1',
      '2606:4700:4700::1111',
      '2001:4860:4860::8888',
      '2a00:1450:4001::1',
    ]) {
      expect(isBlockedAddress(address), address).toBe(false);
    }
  });

  it('resolves host names: localhost (system DNS) and names pointing at private addresses are refused', async () => {
    await expect(checkDestination(new URL('http://localhost:8080/x'), systemResolver)).rejects.toThrow(
      /resolves to/,
    );
    const dns = tableResolver({ 'mixed.example': [PUBLIC, '10.0.0.7'], 'ok.example': [PUBLIC] });
    await expect(checkDestination(new URL('https://mixed.example/'), dns)).rejects.toThrow(/10\.0\.0\.7/);
    await expect(checkDestination(new URL('https://nowhere.example/'), dns)).rejects.toThrow(
      /does not resolve/,
    );
    await expect(checkDestination(new URL('https://ok.example/'), dns)).resolves.toBeUndefined();
  });
});

describe('webhook settings', () => {
  it('reads WEBHOOK_RETRY_SCHEDULE and WEBHOOK_ALLOW_PRIVATE_URLS, refusing bad values by name', () => {
    const defaults = loadConfig({}).webhooks;
    expect(defaults).toMatchObject({
      retrySchedule: [5, 300, 1800, 7200, 18000, 36000, 36000],
      allowPrivateUrls: false,
      timeoutMs: 10_000,
    });
    expect(
      loadConfig({ WEBHOOK_RETRY_SCHEDULE: ' 1, 2 ,3', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }).webhooks,
    ).toMatchObject({
      retrySchedule: [1, 2, 3],
      allowPrivateUrls: true,
    });
    for (const [name, value] of [
      ['WEBHOOK_RETRY_SCHEDULE', '5,,300'],
      ['WEBHOOK_RETRY_SCHEDULE', '5,-1'],
      ['WEBHOOK_RETRY_SCHEDULE', '1.5'],
      ['WEBHOOK_RETRY_SCHEDULE', 'soon'],
      ['WEBHOOK_RETRY_SCHEDULE', '999999999'],
      ['WEBHOOK_ALLOW_PRIVATE_URLS', 'maybe'],
      ['WEBHOOK_TIMEOUT_SECONDS', '0'],
      ['WEBHOOK_POLL_INTERVAL_MS', 'fast'],
      ['WEBHOOK_BATCH_SIZE', '0'],
    ]) {
      expect(() => loadConfig({ [name!]: value }), `${name}=${value}`).toThrow(ConfigError);
      expect(() => loadConfig({ [name!]: value })).toThrow(name);
    }
  });
});

for (const dialect of dialects) {
  describe(`webhook SSRF protection (${dialect})`, () => {
    let t: TestApp;
    let rebinds = 0;
    const receivers: Receiver[] = [];
    const dns = tableResolver({
      'hooks.example.com': [PUBLIC],
      'intranet.example': ['10.1.2.3'],
      'metadata.example': ['169.254.169.254'],
      'six.example': ['2606:4700:4700::1111', 'fd00::5'],
      'sixtofour.example': ['2002:7f00:1::1'],
      'nat64.example': ['64:ff9b:1::a00:1'],
      localhost: ['127.0.0.1', '::1'],
      // Public when the endpoint is saved, loopback when the worker connects: DNS rebinding.
      'rebind.example': () => (rebinds++ === 0 ? [PUBLIC] : ['127.0.0.1']),
    });
    beforeAll(async () => {
      t = await buildTestApp(
        dialect,
        { WEBHOOK_RETRY_SCHEDULE: '0', WEBHOOK_ALLOW_PRIVATE_URLS: 'false' },
        {
          webhookResolver: dns,
        },
      );
    });
    afterAll(async () => {
      await Promise.all(receivers.map((r) => r.close()));
      await t.close();
    });

    it('refuses, when saved, every blocked address family, https included, and names resolving to them', async () => {
      const owner = await register(t.app);
      for (const url of [
        'http://127.0.0.1/hook',
        'https://127.0.0.1/hook',
        'http://127.1/hook',
        'http://2130706433/hook',
        'http://0x7f.0.0.1/hook',
        'http://0.0.0.0/hook',
        'http://10.0.0.8/hook',
        'http://172.20.1.1/hook',
        'http://192.168.0.10/hook',
        'http://169.254.169.254/latest/meta-data',
        'http://100.64.1.1/hook',
        'http://[::1]/hook',
        'http://[fe80::1]/hook',
        'http://[fc00::1]/hook',
        'http://[fd00:ec2::254]/hook',
        'http://[::ffff:127.0.0.1]/hook',
        'http://[::ffff:10.0.0.1]/hook',
        'http://[::127.0.0.1]/hook',
        'http://[::ffff:0:7f00:1]/hook',
        'http://[::ffff:0:127.0.0.1]/hook',
        'http://[2002:7f00:1::]/hook',
        'https://[2002:a9fe:a9fe::]/latest/meta-data',
        'http://[64:ff9b:1::7f00:1]/hook',
        'http://[64:ff9b::a9fe:a9fe]/hook',
        'http://[::ffff:127.0.0.1]:8080/hook',
        'http://localhost:3000/hook',
        'https://intranet.example/hook',
        'http://metadata.example/hook',
        'https://six.example/hook',
        'https://sixtofour.example/hook',
        'https://nat64.example/hook',
        'https://does-not-resolve.example/hook',
      ]) {
        const res = await call(t.app, 'POST', '/api/webhooks', { token: owner.token, body: { url } });
        expectError(res, 422, 'validation_error');
        expect(res.body.details.url, url).toHaveLength(1);
      }
      const ok = await call(t.app, 'POST', '/api/webhooks', {
        token: owner.token,
        body: { url: 'https://hooks.example.com/ces' },
      });
      expect(ok.status).toBe(201);
      const patched = await call(t.app, 'PATCH', `/api/webhooks/${ok.body.data.id}`, {
        token: owner.token,
        body: { url: 'http://192.168.1.1/' },
      });
      expectError(patched, 422, 'validation_error');
      expect((await call(t.app, 'GET', '/api/webhooks', { token: owner.token })).body.data.total).toBe(1);
    });

    it('refuses at connect time a name that resolved publicly when saved and privately now (DNS rebinding), before any connection', async () => {
      const owner = await register(t.app);
      const r = await startReceiver();
      receivers.push(r);
      const created = await call(t.app, 'POST', '/api/webhooks', {
        token: owner.token,
        body: { url: `http://rebind.example:${r.port}/hooks` },
      });
      expect(created.status).toBe(201);
      await call(t.app, 'POST', '/api/grievances', { token: owner.token, body: { title: 'Drain blocked' } });
      await workerFor(t, [owner.user.workspace_id], { resolver: dns }).drain();
      expect(r.connections).toBe(0);
      const log = await call(t.app, 'GET', `/api/webhooks/${created.body.data.id}/deliveries`, {
        token: owner.token,
      });
      expect(log.body.data.data[0]).toMatchObject({ status: 'failed', attempts: 2, last_status_code: null });
      expect(log.body.data.data[0].last_error).toMatch(
        /refused to connect: rebind\.example resolves to 127\.0\.0\.1/,
      );
    });

    it('refuses at send time a literal private address saved while private URLs were allowed', async () => {
      const owner = await register(t.app);
      const r = await startReceiver();
      receivers.push(r);
      // As if saved while WEBHOOK_ALLOW_PRIVATE_URLS was true: written straight to the table.
      const now = new Date().toISOString();
      const [hook] = await t.db.kysely
        .insertInto('webhooks')
        .values({
          workspace_id: owner.user.workspace_id,
          url: r.url,
          description: null,
          events: JSON.stringify(['grievance.created']),
          secret_encrypted: webhookSecretBox(t.config.appKey).seal(newWebhookSecret()),
          disabled_at: null,
          disabled_reason: null,
          created_at: now,
          updated_at: now,
        })
        .returning('id')
        .execute();
      await call(t.app, 'POST', '/api/grievances', { token: owner.token, body: { title: 'Pothole' } });
      await workerFor(t, [owner.user.workspace_id]).drain();
      expect(r.connections).toBe(0);
      const log = await call(t.app, 'GET', `/api/webhooks/${hook!.id}/deliveries`, { token: owner.token });
      expect(log.body.data.data[0]).toMatchObject({ status: 'failed' });
      expect(log.body.data.data[0].last_error).toMatch(/127\.0\.0\.1/);
    });

    it('refuses at send time IPv6 literals that embed a loopback or private IPv4 address', async () => {
      const owner = await register(t.app);
      const now = new Date().toISOString();
      const urls = [
        'http://[::ffff:0:7f00:1]:9/h',
        'http://[2002:7f00:1::]:9/h',
        'http://[64:ff9b:1::7f00:1]:9/h',
      ];
      for (const url of urls) {
        // As if saved while WEBHOOK_ALLOW_PRIVATE_URLS was true: written straight to the table.
        await t.db.kysely
          .insertInto('webhooks')
          .values({
            workspace_id: owner.user.workspace_id,
            url,
            description: null,
            events: JSON.stringify(['grievance.created']),
            secret_encrypted: webhookSecretBox(t.config.appKey).seal(newWebhookSecret()),
            disabled_at: null,
            disabled_reason: null,
            created_at: now,
            updated_at: now,
          })
          .execute();
      }
      await call(t.app, 'POST', '/api/grievances', { token: owner.token, body: { title: 'Streetlight' } });
      await workerFor(t, [owner.user.workspace_id]).drain();
      const hooks = await call(t.app, 'GET', '/api/webhooks', { token: owner.token });
      expect(hooks.body.data.data).toHaveLength(urls.length);
      for (const hook of hooks.body.data.data) {
        const log = await call(t.app, 'GET', `/api/webhooks/${hook.id}/deliveries`, { token: owner.token });
        expect(log.body.data.data[0], hook.url).toMatchObject({ status: 'failed', last_status_code: null });
        expect(log.body.data.data[0].last_error, hook.url).toMatch(
          /refused to connect: .* private, loopback/,
        );
      }
    });
  });
}
