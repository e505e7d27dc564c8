import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import {
  type Account,
  addMember,
  buildTestApp,
  call,
  dialects,
  expectError,
  multipartBody,
  parseCsv,
  register,
  type TestApp,
  uniqueEmail,
  uniquePhone,
} from './helpers.ts';
import { buildProviderTestApp, isolatedDatabase, until } from './messaging-helpers.ts';

const silent = pino({ level: 'silent' });

for (const dialect of dialects) {
  describe(`opt-outs (${dialect})`, () => {
    let t: TestApp;
    let worker: DeliveryWorker;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      t = await buildTestApp(dialect, {
        ...database.env,
        SANDBOX_DELIVERY_DELAY_MS: '0',
        WORKER_BATCH_SIZE: '1',
      });
      worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
    });

    const optOut = (owner: Account, body: unknown) =>
      call(t.app, 'POST', '/api/opt-outs', { token: owner.token, body });
    const credits = async (owner: Account) =>
      (await call(t.app, 'GET', '/api/user', { token: owner.token })).body.data.credits;
    const messagesOf = (campaignRef: string) =>
      t.db.kysely
        .selectFrom('messages')
        .select(['to', 'status', 'error_code'])
        .where('campaign_id', '=', Number(campaignRef.slice(5)))
        .orderBy('id')
        .execute();
    const campaign = async (owner: Account, id: string) =>
      (await call(t.app, 'GET', `/api/campaigns/${id}`, { token: owner.token })).body.data;

    it('creates (201, then 200 with the same one), normalises, lists with filters and deletes', async () => {
      const owner = await register(t.app);
      const first = await optOut(owner, { address: '98123 45678', channel: 'sms', reason: 'asked' });
      expect(first.status).toBe(201);
      expect(first.body.data).toMatchObject({
        address: '+919812345678',
        channel: 'sms',
        source: 'manual',
        reason: 'asked',
      });
      expect(first.body.data.created_at).toMatch(/Z$/);
      const again = await optOut(owner, { address: '+919812345678', channel: 'sms' });
      expect(again.status).toBe(200);
      expect(again.body.data.id).toBe(first.body.data.id);
      const email = await optOut(owner, { address: ' Asha.Rao@Example.COM ', channel: 'all' });
      expect(email.status).toBe(201);
      expect(email.body.data).toMatchObject({
        address: 'asha.rao@example.com',
        channel: 'all',
        reason: null,
      });

      const all = await call(t.app, 'GET', '/api/opt-outs', { token: owner.token });
      expect(all.body.data.total).toBe(2);
      expect(all.body.data.data[0].id).toBe(email.body.data.id);
      const bySms = await call(t.app, 'GET', '/api/opt-outs?channel=sms', { token: owner.token });
      expect(bySms.body.data.data.map((o: { id: number }) => o.id)).toEqual([first.body.data.id]);
      const byAddress = await call(t.app, 'GET', '/api/opt-outs?address=ASHA.RAO%40example.com', {
        token: owner.token,
      });
      expect(byAddress.body.data.data.map((o: { id: number }) => o.id)).toEqual([email.body.data.id]);

      const del = await call(t.app, 'DELETE', `/api/opt-outs/${first.body.data.id}`, { token: owner.token });
      expect(del.status).toBe(200);
      expectError(
        await call(t.app, 'DELETE', `/api/opt-outs/${first.body.data.id}`, { token: owner.token }),
        404,
        'not_found',
      );
      const audit = await t.db.kysely
        .selectFrom('audit_log')
        .select('action')
        .where('workspace_id', '=', owner.user.workspace_id)
        .where('action', 'like', 'opt_out.%')
        .orderBy('id')
        .execute();
      expect(audit.map((a) => a.action)).toEqual(['opt_out.created', 'opt_out.created', 'opt_out.deleted']);
    });

    it('refuses bad input, other roles and other workspaces', async () => {
      const owner = await register(t.app);
      const stranger = await register(t.app);
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const manager = await addMember(t.app, owner, 'manager');
      for (const [body, field] of [
        [{ address: 'not a phone', channel: 'sms' }, 'address'],
        [{ address: '+919812345678', channel: 'email' }, 'address'],
        [{ address: 'x@y.com', channel: 'fax' }, 'channel'],
        [{ address: 'x@y.com' }, 'channel'],
        [{ address: 'x@y.com', channel: 'email', extra: 1 }, 'extra'],
      ] as const) {
        const res = await optOut(owner, body);
        expectError(res, 422, 'validation_error');
        expect(Object.keys(res.body.details)).toContain(field);
      }
      expectError(
        await call(t.app, 'GET', '/api/opt-outs?address=nonsense', { token: owner.token }),
        422,
        'validation_error',
      );
      expectError(await call(t.app, 'GET', '/api/opt-outs'), 401, 'unauthorized');
      expectError(await call(t.app, 'GET', '/api/opt-outs', { token: volunteer.token }), 403, 'forbidden');
      expect((await optOut(manager, { address: uniqueEmail(), channel: 'email' })).status).toBe(201);
      const mine = await optOut(owner, { address: uniquePhone(), channel: 'all' });
      expectError(
        await call(t.app, 'DELETE', `/api/opt-outs/${mine.body.data.id}`, { token: stranger.token }),
        404,
        'not_found',
      );
      const theirs = await call(t.app, 'GET', '/api/opt-outs', { token: stranger.token });
      expect(theirs.body.data.total).toBe(0);
    });

    it('refuses a send to an opted-out address with 422 on `to`, per channel', async () => {
      const owner = await register(t.app);
      const phone = uniquePhone();
      await optOut(owner, { address: phone, channel: 'sms' });
      const refused = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: phone, message: 'Hello' },
      });
      expectError(refused, 422, 'validation_error');
      expect(refused.body.details.to[0]).toMatch(/opted out/);
      expect((await credits(owner)).sms_credits).toBe(100);
      // Another channel is still allowed; `all` stops every channel.
      const whatsapp = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'whatsapp', to: phone, message: 'Hello' },
      });
      expect(whatsapp.status).toBe(201);
      await optOut(owner, { address: phone, channel: 'all' });
      for (const channel of ['whatsapp', 'ivr'] as const) {
        const res = await call(t.app, 'POST', '/api/messages/send', {
          token: owner.token,
          body: { channel, to: phone, message: 'Hello' },
        });
        expectError(res, 422, 'validation_error');
      }
      // Another workspace's opt-out does not apply here.
      const other = await register(t.app);
      const res = await call(t.app, 'POST', '/api/messages/send', {
        token: other.token,
        body: { channel: 'sms', to: phone, message: 'Hello' },
      });
      expect(res.status).toBe(201);
    });

    it('fails opted-out recipients of a broadcast with opted_out and refunds them, checked as the broadcast drains', async () => {
      const owner = await register(t.app);
      const phones = [uniquePhone(), uniquePhone(), uniquePhone(), uniquePhone()];
      await optOut(owner, { address: phones[0], channel: 'sms' });
      const res = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Hello', recipients: phones },
      });
      expect(res.status).toBe(202);
      const id = res.body.data.campaign_id as string;
      expect((await credits(owner)).sms_credits).toBe(96);
      // One batch (WORKER_BATCH_SIZE 1) at a time: the first two are decided, then phones[3] opts out.
      await worker.round();
      await worker.round();
      await worker.round();
      const midway = await messagesOf(id);
      expect(midway.filter((m) => m.status === 'queued').length).toBeGreaterThan(0);
      await optOut(owner, { address: phones[3], channel: 'all' });
      await until(async () => {
        await worker.drain();
        return (await campaign(owner, id)).status === 'completed';
      }, 'the broadcast to complete');
      const rows = await messagesOf(id);
      const byPhone = new Map(rows.map((m) => [m.to, m]));
      expect(byPhone.get(phones[0]!)).toMatchObject({ status: 'failed', error_code: 'opted_out' });
      expect(byPhone.get(phones[3]!)).toMatchObject({ status: 'failed', error_code: 'opted_out' });
      expect(byPhone.get(phones[1]!)).toMatchObject({ status: 'delivered', error_code: null });
      expect(byPhone.get(phones[2]!)).toMatchObject({ status: 'delivered', error_code: null });
      expect((await credits(owner)).sms_credits).toBe(98);
      const sent = t.providers.sms.sent.map((m) => m.to);
      expect(sent).not.toContain(phones[0]);
      expect(sent).not.toContain(phones[3]);
    });

    it('stops WhatsApp template sends and IVR calls of a campaign too', async () => {
      const owner = await register(t.app);
      const phone = uniquePhone();
      await optOut(owner, { address: phone, channel: 'all' });
      for (const body of [
        { channel: 'whatsapp', message: 'Hello', template_id: 'rally_invite', recipients: [phone] },
        { channel: 'ivr', message: 'Hello', recipients: [phone] },
      ]) {
        const res = await call(t.app, 'POST', '/api/messages/broadcast', { token: owner.token, body });
        const id = res.body.data.campaign_id as string;
        await until(async () => {
          await worker.drain();
          return (await campaign(owner, id)).status === 'completed';
        }, 'the campaign to complete');
        expect(await messagesOf(id)).toEqual([{ to: phone, status: 'failed', error_code: 'opted_out' }]);
      }
      expect((await credits(owner)).whatsapp_credits).toBe(100);
    });

    it('imports and exports CSV', async () => {
      const owner = await register(t.app);
      const phone = uniquePhone();
      const csv =
        'address,channel,reason\n' +
        `${phone},sms,"said no, twice"\n` +
        'Someone@Example.com,,\n' +
        'bad,sms,\n' +
        `${phone},fax,\n` +
        `${phone},sms,again\n`;
      const { payload, contentType } = multipartBody([{ name: 'file', content: csv, filename: 'o.csv' }]);
      const imported = await t.app.inject({
        method: 'POST',
        url: '/api/opt-outs/import',
        headers: { authorization: `Bearer ${owner.token}`, 'content-type': contentType },
        payload,
      });
      expect(imported.statusCode).toBe(200);
      expect(imported.json().data).toEqual({
        created: 2,
        existing: 1,
        failed: 2,
        errors: [
          { row: 4, field: 'address', message: expect.any(String) },
          { row: 5, field: 'channel', message: expect.any(String) },
        ],
      });
      const exported = await call(t.app, 'GET', '/api/opt-outs/export', { token: owner.token });
      expect(exported.status).toBe(200);
      expect(exported.headers['content-type']).toBe('text/csv; charset=utf-8');
      expect(exported.headers['content-disposition']).toMatch(/^attachment; filename="opt-outs-/);
      const rows = parseCsv(exported.raw);
      expect(rows[0]).toEqual(['id', 'address', 'channel', 'source', 'reason', 'created_at']);
      expect(rows.slice(1).map((r) => [r[1], r[2], r[3], r[4]])).toEqual([
        [phone, 'sms', 'manual', 'said no, twice'],
        ['someone@example.com', 'all', 'manual', ''],
      ]);
      // The export imports back into another workspace unchanged.
      const other = await register(t.app);
      const back = multipartBody([{ name: 'file', content: exported.raw }]);
      const again = await t.app.inject({
        method: 'POST',
        url: '/api/opt-outs/import',
        headers: { authorization: `Bearer ${other.token}`, 'content-type': back.contentType },
        payload: back.payload,
      });
      expect(again.json().data).toMatchObject({ created: 2, existing: 0, failed: 0 });
      const noHeader = multipartBody([{ name: 'file', content: 'phone\n+919812345678\n' }]);
      const refused = await t.app.inject({
        method: 'POST',
        url: '/api/opt-outs/import',
        headers: { authorization: `Bearer ${owner.token}`, 'content-type': noHeader.contentType },
        payload: noHeader.payload,
      });
      expect(refused.statusCode).toBe(422);
    });
  });
}

for (const dialect of dialects) {
  describe(`one-click unsubscribe on campaign email (${dialect})`, () => {
    const received: Array<{ to: string[]; raw: string }> = [];
    let smtp: SMTPServer;
    let t: Awaited<ReturnType<typeof buildProviderTestApp>>;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      smtp = new SMTPServer({
        authOptional: true,
        disabledCommands: ['STARTTLS', 'AUTH'],
        logger: false,
        // smtp-server refuses paths over 253 octets; RFC 5321's 256-octet path holds a 254-character address.
        lenientAddressParsing: true,
        onData(stream, session, callback) {
          const chunks: Buffer[] = [];
          stream.on('data', (c: Buffer) => chunks.push(c));
          stream.on('end', () => {
            received.push({
              to: session.envelope.rcptTo.map((r) => r.address),
              raw: Buffer.concat(chunks).toString('utf8'),
            });
            callback();
          });
        },
      });
      await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
      database = await isolatedDatabase(dialect);
      t = await buildProviderTestApp(dialect, {
        ...database.env,
        EMAIL_PROVIDER: 'smtp',
        SMTP_HOST: '127.0.0.1',
        SMTP_PORT: String((smtp.server.address() as AddressInfo).port),
        SMTP_FROM: 'Campaign Office <office@example.org>',
        PUBLIC_BASE_URL: 'https://ces.example.org',
      });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
      await new Promise<void>((resolve) => smtp.close(() => resolve()));
    });

    it('carries List-Unsubscribe and List-Unsubscribe-Post; a POST to the link opts the address out of email', async () => {
      const owner = await register(t.app);
      const worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
      const address = uniqueEmail('voter');
      const res = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'email', subject: 'Rally', message: 'Rally on Sunday', recipients: [address] },
      });
      expect(res.status).toBe(202);
      await until(async () => {
        await worker.drain();
        return received.some((m) => m.to.includes(address));
      }, 'the email to arrive');
      const mail = received.find((m) => m.to.includes(address))!;
      const head = mail.raw.split(/\r?\n\r?\n/, 1)[0]!.replace(/\r?\n[ \t]+/g, ' ');
      expect(head).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click$/m);
      const link = /^List-Unsubscribe: <(https:\/\/ces\.example\.org\/api\/unsubscribe\/[^>]+)>$/m.exec(
        head,
      )?.[1];
      expect(link).toBeDefined();
      const path = new URL(link!).pathname;
      const post = (url: string) =>
        call(t.app, 'POST', url, {
          body: 'List-Unsubscribe=One-Click',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        });
      // The link carries no readable address (sealed under APP_KEY), and a forged or altered one changes nothing.
      const token = path.slice('/api/unsubscribe/'.length);
      expect(token).toMatch(/^v1\./);
      for (const part of token.split('.'))
        expect(Buffer.from(part, 'base64url').toString('latin1')).not.toContain(address.split('@')[0]);
      const [version, iv, tag, body] = token.split('.') as [string, string, string, string];
      const forged = Buffer.from(`${owner.user.workspace_id}:someone.else@example.com`).toString('base64url');
      expectError(await post(`/api/unsubscribe/${version}.${iv}.${tag}.${forged}`), 404, 'not_found');
      // The tag altered in its first character (six whole bits: its last ones may be padding, and a tag that
      // ended in "AA" was once left as it was).
      const altered = `${tag[0] === 'A' ? 'B' : 'A'}${tag.slice(1)}`;
      expectError(await post(`/api/unsubscribe/${version}.${iv}.${altered}.${body}`), 404, 'not_found');
      expectError(await post('/api/unsubscribe/nonsense'), 404, 'not_found');
      // The page is in Hindi for a browser that asks for it.
      const hindi = await call(t.app, 'GET', path, {
        headers: { accept: 'text/html', 'accept-language': 'hi-IN,hi;q=0.9,en;q=0.8' },
      });
      expect(hindi.raw).toContain('<html lang="hi">');
      expect(hindi.raw).toContain('ईमेल की सदस्यता समाप्त करें');
      const english = await call(t.app, 'GET', path, {
        headers: { accept: 'text/html', 'accept-language': 'en-IN' },
      });
      expect(english.raw).toContain('Unsubscribe from email');
      // A voter with that address whose language is Hindi gets the page in Hindi, whatever the browser asks.
      const voter = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Hindi Reader', phone: uniquePhone(), email: address, language: 'hi' },
      });
      expect(voter.status, voter.raw).toBe(201);
      const theirs = await call(t.app, 'GET', path, {
        headers: { accept: 'text/html', 'accept-language': 'en-IN' },
      });
      expect(theirs.raw).toContain('<html lang="hi">');
      // No token needed: the link is the credential.
      const ok = await post(path);
      expect(ok.status).toBe(200);
      expect(ok.body.data).toEqual({ channel: 'email', unsubscribed: true });
      expect((await post(path)).status).toBe(200);
      const list = await call(t.app, 'GET', '/api/opt-outs', { token: owner.token });
      expect(list.body.data.data).toMatchObject([{ address, channel: 'email', source: 'unsubscribe_link' }]);
      // The next campaign email to that address is not sent.
      const again = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'email', subject: 'Rally', message: 'Second', recipients: [address] },
      });
      const id = Number(String(again.body.data.campaign_id).slice(5));
      await until(async () => {
        await worker.drain();
        const row = await t.db.kysely
          .selectFrom('messages')
          .select(['status', 'error_code'])
          .where('campaign_id', '=', id)
          .executeTakeFirst();
        return row?.status === 'failed' && row.error_code === 'opted_out';
      }, 'the second email to fail as opted out');
      expect(received.filter((m) => m.to.includes(address))).toHaveLength(1);
    });

    it('a 254-character address unsubscribes through its link, posted as multipart, text/plain or nothing; GET shows a page; the body has the link', async () => {
      const owner = await register(t.app);
      const worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
      const local = `v${Date.now()}`.padEnd(64, 'x');
      const domain = `${'d'.repeat(62)}.${'e'.repeat(62)}.${'f'.repeat(51)}.example.org`;
      const address = `${local}@${domain}`;
      expect(address).toHaveLength(254);
      const res = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'email', subject: 'Rally', message: 'Rally on Sunday', recipients: [address] },
      });
      expect(res.status).toBe(202);
      await until(async () => {
        await worker.drain();
        return received.some((m) => m.to.includes(address));
      }, 'the email to arrive');
      const mail = received.find((m) => m.to.includes(address))!;
      const [head, ...rest] = mail.raw.split(/\r?\n\r?\n/);
      const link = /^List-Unsubscribe: ?<([^>]+)>$/m.exec(head!.replace(/\r?\n[ \t]+/g, ''))?.[1];
      expect(link).toBeDefined();
      expect(new URL(link!).pathname.length).toBeGreaterThan(300);
      // The body (base64) ends with the same link, visible to a person.
      const text = Buffer.from(rest.join('\n').replace(/\s+/g, ''), 'base64').toString('utf8');
      expect(text).toContain('Rally on Sunday');
      expect(text.trimEnd().endsWith(link!)).toBe(true);
      const path = new URL(link!).pathname;

      // GET: a page naming the address, with a button that posts; it changes nothing.
      const pageRes = await call(t.app, 'GET', path);
      expect(pageRes.status).toBe(200);
      expect(pageRes.headers['content-type']).toMatch(/^text\/html/);
      expect(pageRes.raw).toContain(address);
      expect(pageRes.raw).toMatch(/<form method="post"><button type="submit">/);
      const before = await call(t.app, 'GET', '/api/opt-outs', { token: owner.token });
      expect(before.body.data.data).toEqual([]);
      const bad = await call(t.app, 'GET', `${path.slice(0, -3)}AAA`, { headers: { accept: 'text/html' } });
      expect(bad.status).toBe(404);
      expect(bad.headers['content-type']).toMatch(/^text\/html/);
      expectError(await call(t.app, 'GET', `${path.slice(0, -3)}AAA`), 404, 'not_found');

      // POST as multipart/form-data (what RFC 8058 says mail clients send), text/plain, or no body at all.
      const multipart = multipartBody([{ name: 'List-Unsubscribe', value: 'One-Click' }]);
      const viaMultipart = await t.app.inject({
        method: 'POST',
        url: path,
        headers: { 'content-type': multipart.contentType },
        payload: multipart.payload,
      });
      expect(viaMultipart.statusCode).toBe(200);
      expect(viaMultipart.json().data).toEqual({ channel: 'email', unsubscribed: true });
      const plain = await call(t.app, 'POST', path, {
        body: 'List-Unsubscribe=One-Click',
        headers: { 'content-type': 'text/plain' },
      });
      expect(plain.status).toBe(200);
      expect((await t.app.inject({ method: 'POST', url: path })).statusCode).toBe(200);
      // A browser's form post from the page gets the confirmation page.
      const browser = await call(t.app, 'POST', path, {
        body: '',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
      });
      expect(browser.status).toBe(200);
      expect(browser.raw).toContain('You are unsubscribed');
      const list = await call(t.app, 'GET', '/api/opt-outs', { token: owner.token });
      expect(list.body.data.data).toMatchObject([{ address, channel: 'email', source: 'unsubscribe_link' }]);
    });
  });
}
