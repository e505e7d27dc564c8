import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { SandboxProvider } from '../src/providers/sandbox/index.ts';
import { call, dialects, expectError, register, uniquePhone } from './helpers.ts';
import { buildProviderTestApp, isolatedDatabase, until } from './messaging-helpers.ts';

const SID = 'AC0123456789abcdef0123456789abcdef';
const TOKEN = 'twilio-auth-token';
const PUBLIC = 'https://ces.example.org';

interface TwilioRequest {
  path: string;
  authorization: string | undefined;
  form: Record<string, string>;
}

/** A local server speaking Twilio's REST wire format (form in, JSON out). */
async function fakeTwilio(): Promise<{ server: Server; url: string; requests: TwilioRequest[] }> {
  const requests: TwilioRequest[] = [];
  let n = 0;
  const server = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const form = Object.fromEntries(new URLSearchParams(body));
      requests.push({ path: req.url ?? '', authorization: req.headers.authorization, form });
      const json = (status: number, payload: object) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(payload));
      };
      const expected = `Basic ${Buffer.from(`${SID}:${TOKEN}`).toString('base64')}`;
      if (req.headers.authorization !== expected)
        return json(401, { code: 20003, message: 'Authenticate', status: 401 });
      const to = form.To ?? '';
      if (to.endsWith('9999'))
        return json(400, {
          code: 21211,
          message: `The 'To' number ${to} is not a valid phone number.`,
          status: 400,
        });
      if (to.endsWith('6100'))
        return json(400, { code: 21610, message: 'Attempt to send to unsubscribed recipient', status: 400 });
      if (to.endsWith('5030')) return json(503, { code: 20500, message: 'Service unavailable', status: 503 });
      n += 1;
      const calls = (req.url ?? '').endsWith('/Calls.json');
      return json(201, { sid: `${calls ? 'CA' : 'SM'}${String(n).padStart(32, '0')}`, status: 'queued' });
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests };
}

/** Twilio's documented signature, computed independently of the application's code. */
function sign(url: string, params: Record<string, string>, token = TOKEN): string {
  const data = Object.keys(params)
    .sort()
    .reduce((acc, k) => acc + k + params[k], url);
  return createHmac('sha1', token).update(data).digest('base64');
}

for (const dialect of dialects) {
  describe(`Twilio provider (${dialect})`, () => {
    let twilio: Awaited<ReturnType<typeof fakeTwilio>>;
    let t: Awaited<ReturnType<typeof buildProviderTestApp>>;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      twilio = await fakeTwilio();
      database = await isolatedDatabase(dialect);
      t = await buildProviderTestApp(dialect, {
        QUIET_HOURS: '',
        ...database.env,
        SMS_PROVIDER: 'twilio',
        WHATSAPP_PROVIDER: 'twilio',
        IVR_PROVIDER: 'twilio',
        TWILIO_ACCOUNT_SID: SID,
        TWILIO_AUTH_TOKEN: TOKEN,
        TWILIO_API_BASE_URL: twilio.url,
        TWILIO_SMS_FROM: '+15005550006',
        TWILIO_WHATSAPP_FROM: '+14155238886',
        TWILIO_VOICE_FROM: '+15005550006',
        PUBLIC_BASE_URL: PUBLIC,
        DELIVERY_RETRY_SCHEDULE: '0,0',
      });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
      twilio.server.close();
    });

    const callback = (id: string, params: Record<string, string>, signature?: string) => {
      const path = `/api/providers/twilio/status?message=${id}`;
      return call(t.app, 'POST', path, {
        body: new URLSearchParams(params).toString(),
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          'x-twilio-signature': signature ?? sign(`${PUBLIC}${path}`, params),
        },
      });
    };
    const statusOf = async (token: string, id: string) =>
      (await call(t.app, 'GET', '/api/messages/history?per_page=100', { token })).body.data.data.find(
        (m: { id: string }) => m.id === id,
      )?.status;
    const messageOf = async (token: string, id: string) =>
      (await call(t.app, 'GET', `/api/messages/${id}`, { token })).body.data;

    it('sends SMS over the REST API and takes signed status callbacks; forgeries change nothing', async () => {
      const owner = await register(t.app);
      const to = uniquePhone();
      const res = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to, message: 'Rally at 5 — नमस्ते' },
      });
      expect(res.status).toBe(201);
      const id = res.body.data.id as string;
      const request = twilio.requests.find((r) => r.form.To === to);
      expect(request?.path).toBe(`/2010-04-01/Accounts/${SID}/Messages.json`);
      expect(request?.form).toMatchObject({
        From: '+15005550006',
        Body: 'Rally at 5 — नमस्ते',
        StatusCallback: `${PUBLIC}/api/providers/twilio/status?message=${id}`,
      });
      const delivered = { MessageSid: 'SM1', MessageStatus: 'delivered', AccountSid: SID };
      expectError(await callback(id, { ...delivered }, sign(`${PUBLIC}/x`, delivered)), 403, 'forbidden');
      expectError(
        await callback(
          id,
          delivered,
          sign(`${PUBLIC}/api/providers/twilio/status?message=${id}`, delivered, 'wrong'),
        ),
        403,
        'forbidden',
      );
      expectError(await callback(id, delivered, 'c2lnbmF0dXJl'), 403, 'forbidden');
      const tampered = call(t.app, 'POST', `/api/providers/twilio/status?message=${id}`, {
        body: new URLSearchParams({ ...delivered, MessageStatus: 'failed' }).toString(),
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          'x-twilio-signature': sign(`${PUBLIC}/api/providers/twilio/status?message=${id}`, delivered),
        },
      });
      expectError(await tampered, 403, 'forbidden');
      expect(await statusOf(owner.token, id)).toBe('sent');
      expect((await callback(id, { ...delivered, MessageStatus: 'sent' })).status).toBe(200);
      expect(await statusOf(owner.token, id)).toBe('sent');
      expect((await callback(id, delivered)).status).toBe(200);
      expect(await statusOf(owner.token, id)).toBe('delivered');
      // A late failure report does not move it back, nor refund.
      expect(
        (await callback(id, { ...delivered, MessageStatus: 'undelivered', ErrorCode: '30003' })).status,
      ).toBe(200);
      expect(await statusOf(owner.token, id)).toBe('delivered');
      expect(
        (await call(t.app, 'GET', '/api/user', { token: owner.token })).body.data.credits.sms_credits,
      ).toBe(99);
    });

    it('WhatsApp with the whatsapp: prefix and media; IVR as a call that speaks the message', async () => {
      const owner = await register(t.app);
      const to = uniquePhone();
      await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'whatsapp', to, message: 'See you', media_url: 'https://example.org/a.png' },
      });
      expect(twilio.requests.find((r) => r.form.To === `whatsapp:${to}`)?.form).toMatchObject({
        From: 'whatsapp:+14155238886',
        Body: 'See you',
        MediaUrl: 'https://example.org/a.png',
      });
      const voice = uniquePhone();
      const res = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'ivr', to: voice, message: 'Vote <today> & bring ID' },
      });
      expect(res.status).toBe(201);
      const request = twilio.requests.find((r) => r.form.To === voice);
      expect(request?.path).toBe(`/2010-04-01/Accounts/${SID}/Calls.json`);
      expect(request?.form.Twiml).toBe('<Response><Say>Vote &lt;today&gt; &amp; bring ID</Say></Response>');
      const completed = { CallSid: 'CA1', CallStatus: 'completed' };
      expect((await callback(res.body.data.id, completed)).status).toBe(200);
      expect(await statusOf(owner.token, res.body.data.id)).toBe('delivered');
    });

    it('a failure reported by callback carries the mapped Twilio error code', async () => {
      const owner = await register(t.app);
      const codes: Array<[string, string]> = [
        ['30003', 'undeliverable'],
        ['21610', 'opted_out'],
        ['30006', 'invalid_recipient'],
        ['30007', 'provider_rejected'],
        ['', 'undeliverable'],
      ];
      for (const [code, expected] of codes) {
        const res = await call(t.app, 'POST', '/api/messages/send', {
          token: owner.token,
          body: { channel: 'sms', to: uniquePhone(), message: 'x' },
        });
        const id = res.body.data.id as string;
        const report = {
          MessageSid: 'SM2',
          MessageStatus: 'undelivered',
          ...(code ? { ErrorCode: code } : {}),
        };
        expect((await callback(id, report)).status).toBe(200);
        expect(await messageOf(owner.token, id)).toMatchObject({ status: 'failed', error_code: expected });
      }
    });

    it('a refusal is 502 provider_error, the message failed and refunded', async () => {
      const owner = await register(t.app);
      const res = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: '+919812349999', message: 'x' },
      });
      expectError(res, 502, 'provider_error');
      expect(res.body.details.status).toBe('failed');
      expect(await messageOf(owner.token, res.body.details.id)).toMatchObject({
        status: 'failed',
        error_code: 'invalid_recipient',
        error_message: expect.stringContaining('21211'),
      });
      const optedOut = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: '+919812346100', message: 'x' },
      });
      expectError(optedOut, 502, 'provider_error');
      expect(await messageOf(owner.token, optedOut.body.details.id)).toMatchObject({
        error_code: 'opted_out',
      });
      expect(
        (await call(t.app, 'GET', '/api/user', { token: owner.token })).body.data.credits.sms_credits,
      ).toBe(100);
      // With an Idempotency-Key the 502 is the answer a repeat gets, and nothing is sent again.
      const before = twilio.requests.length;
      const headers = { 'idempotency-key': 'refused-1' };
      const body = { channel: 'sms', to: '+919812349999', message: 'y' };
      const first = await call(t.app, 'POST', '/api/messages/send', { token: owner.token, body, headers });
      const again = await call(t.app, 'POST', '/api/messages/send', { token: owner.token, body, headers });
      expectError(again, 502, 'provider_error');
      expect(again.body).toEqual(first.body);
      expect(twilio.requests.length).toBe(before + 1);
    });

    it('the worker retries an unreachable provider on the schedule, then fails and refunds', async () => {
      const owner = await register(t.app);
      const down = '+919812345030';
      const res = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'x', recipients: [down, uniquePhone()] },
      });
      expect(
        (await call(t.app, 'GET', '/api/user', { token: owner.token })).body.data.credits.sms_credits,
      ).toBe(98);
      const worker = new DeliveryWorker({
        db: t.db,
        config: t.config,
        providers: t.providers,
        log: pino({ level: 'silent' }),
      });
      const id = res.body.data.campaign_id;
      await until(async () => {
        await worker.drain();
        const c = (await call(t.app, 'GET', `/api/campaigns/${id}`, { token: owner.token })).body.data;
        return c.status === 'completed';
      }, 'the campaign to complete');
      expect(twilio.requests.filter((r) => r.form.To === down)).toHaveLength(3);
      const c = (await call(t.app, 'GET', `/api/campaigns/${id}`, { token: owner.token })).body.data;
      expect(c.stats).toEqual({ queued: 0, sent: 1, delivered: 0, failed: 1 });
      const failed = await call(t.app, 'GET', `/api/messages/history?campaign_id=${id}&status=failed`, {
        token: owner.token,
      });
      expect(failed.body.data.data).toMatchObject([{ to: down, error_code: 'undeliverable' }]);
      expect(
        (await call(t.app, 'GET', '/api/user', { token: owner.token })).body.data.credits.sms_credits,
      ).toBe(99);
    });
  });

  describe(`SMTP provider (${dialect})`, () => {
    const received: Array<{ from: string; to: string[]; raw: string }> = [];
    let smtp: SMTPServer;
    let t: Awaited<ReturnType<typeof buildProviderTestApp>>;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      smtp = new SMTPServer({
        authOptional: true,
        disabledCommands: ['STARTTLS', 'AUTH'],
        logger: false,
        onRcptTo(address, _session, callback) {
          if (address.address.startsWith('reject')) {
            const error = new Error('Mailbox unavailable') as Error & { responseCode: number };
            error.responseCode = 550;
            return callback(error);
          }
          callback();
        },
        onData(stream, session, callback) {
          const chunks: Buffer[] = [];
          stream.on('data', (c: Buffer) => chunks.push(c));
          stream.on('end', () => {
            received.push({
              from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
              to: session.envelope.rcptTo.map((r) => r.address),
              raw: Buffer.concat(chunks).toString('utf8'),
            });
            callback();
          });
        },
      });
      await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
      const port = (smtp.server.address() as AddressInfo).port;
      database = await isolatedDatabase(dialect);
      t = await buildProviderTestApp(dialect, {
        ...database.env,
        EMAIL_PROVIDER: 'smtp',
        SMTP_HOST: '127.0.0.1',
        SMTP_PORT: String(port),
        SMTP_FROM: 'Campaign Office <office@example.org>',
      });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
      await new Promise<void>((resolve) => smtp.close(() => resolve()));
    });

    it('delivers subject and UTF-8 body to the SMTP server', async () => {
      const owner = await register(t.app);
      const res = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: {
          channel: 'email',
          to: 'Voter.One@Example.com',
          subject: 'रैली on Sunday',
          message: 'नमस्ते! Polling booth 12 opens at 7 — bring your ID.',
        },
      });
      expect(res.status).toBe(201);
      const mail = received.find((m) => m.to.includes('voter.one@example.com'));
      expect(mail?.from).toBe('office@example.org');
      const [head = '', body = ''] = (mail?.raw ?? '').split(/\r?\n\r?\n/, 2);
      const subject = /^Subject: (.*(?:\r?\n[ \t].*)*)/im.exec(head)?.[1] ?? '';
      const decoded = subject
        .replace(/\r?\n[ \t]/g, '')
        .replace(/=\?UTF-8\?([BQ])\?([^?]*)\?=\s*/gi, (_m, enc: string, text: string) =>
          enc.toUpperCase() === 'B'
            ? Buffer.from(text, 'base64').toString('utf8')
            : Buffer.from(
                text
                  .replace(/_/g, ' ')
                  .replace(/=([0-9A-F]{2})/gi, (_x, h: string) => String.fromCharCode(parseInt(h, 16))),
                'latin1',
              ).toString('utf8'),
        );
      expect(decoded).toBe('रैली on Sunday');
      expect(head).toMatch(/charset=utf-8/i);
      expect(head).toMatch(/Content-Transfer-Encoding: base64/i);
      expect(Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8')).toBe(
        'नमस्ते! Polling booth 12 opens at 7 — bring your ID.',
      );
    });

    it('a rejected recipient is 502 provider_error, failed and refunded', async () => {
      const owner = await register(t.app);
      const res = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'email', to: 'reject@example.com', subject: 'x', message: 'x' },
      });
      expectError(res, 502, 'provider_error');
      const message = (
        await call(t.app, 'GET', `/api/messages/${res.body.details.id}`, { token: owner.token })
      ).body.data;
      expect(message).toMatchObject({ status: 'failed', error_code: 'invalid_recipient' });
      expect(
        (await call(t.app, 'GET', '/api/user', { token: owner.token })).body.data.credits.email_credits,
      ).toBe(100);
    });
  });
}

describe('sandbox provider', () => {
  it('logs the DLT template id and sender id an SMS is given, so an operator can see DLT_ENFORCE at work', async () => {
    const lines: Record<string, unknown>[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const sandbox = new SandboxProvider('sms', log, 0);
    await sandbox.send({
      channel: 'sms',
      to: '+919812345678',
      body: 'Namaste',
      reference: 'msg_1',
      dltTemplateId: '1107160000000012345',
      senderId: 'NETAJI',
    });
    await sandbox.send({ channel: 'sms', to: '+919812345678', body: 'Plain', reference: 'msg_2' });
    const sent = lines.filter((l) => l.msg === 'sandbox message');
    expect(sent[0]).toMatchObject({
      reference: 'msg_1',
      dlt_template_id: '1107160000000012345',
      sender_id: 'NETAJI',
    });
    expect(sent[1]).toMatchObject({ reference: 'msg_2' });
    expect(sent[1]).not.toHaveProperty('dlt_template_id');
  });
});
