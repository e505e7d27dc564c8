import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { ProviderError } from '../src/providers/provider.ts';
import { SmtpProvider } from '../src/providers/smtp/index.ts';
import { call, dialects, register, uniquePhone } from './helpers.ts';
import { buildProviderTestApp, isolatedDatabase, until } from './messaging-helpers.ts';

/**
 * A provider that hangs holds only its own channel's lane: SMS goes out while the SMTP server sits on every
 * email addressed to `hang...`; the hung call is given up after PROVIDER_TIMEOUT_MS and retried on the
 * schedule, then failed and refunded; the direct send answers 502 in that time.
 */
const TIMEOUT_MS = 1000;

for (const dialect of dialects) {
  describe(`delivery isolation between providers (${dialect})`, () => {
    const accepted: string[] = [];
    let hanging = 0;
    let smtp: SMTPServer;
    let t: Awaited<ReturnType<typeof buildProviderTestApp>>;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      smtp = new SMTPServer({
        authOptional: true,
        disabledCommands: ['STARTTLS', 'AUTH'],
        logger: false,
        closeTimeout: 100,
        onData(stream, session, callback) {
          const to = session.envelope.rcptTo.map((r) => r.address);
          stream.resume();
          stream.on('end', () => {
            // Never answers the DATA command for these: the provider call hangs.
            if (to.some((a) => a.startsWith('hang'))) hanging += 1;
            else {
              accepted.push(...to);
              callback();
            }
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
        SMTP_FROM: 'office@example.org',
        PROVIDER_TIMEOUT_MS: String(TIMEOUT_MS),
        // A call may take half the lease: the second email of a batch is given back, not attempted late.
        WORKER_LEASE_SECONDS: '2',
        WORKER_POLL_MS: '20',
        DELIVERY_RETRY_SCHEDULE: '1',
        SANDBOX_DELIVERY_DELAY_MS: '0',
      });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
      await new Promise<void>((resolve) => smtp.close(() => resolve()));
    });

    async function messages(campaign: string) {
      return t.db.kysely
        .selectFrom('messages')
        .select(['id', 'status', 'attempts', 'error', 'error_code', 'provider_message_id'])
        .where('campaign_id', '=', Number(campaign.slice(5)))
        .orderBy('id')
        .execute();
    }

    it('a hung email provider does not delay SMS; its calls time out and are not repeated: sent, unconfirmed, until UNCONFIRMED_AFTER_HOURS fails and refunds them', async () => {
      const owner = await register(t.app);
      const email = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: {
          channel: 'email',
          subject: 'Rally',
          message: 'Rally on Sunday',
          recipients: ['hang1@example.com', 'hang2@example.com'],
        },
      });
      expect(email.status).toBe(202);
      const sms = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Rally on Sunday', recipients: [uniquePhone(), uniquePhone()] },
      });
      expect(sms.status).toBe(202);
      const worker = new DeliveryWorker({
        db: t.db,
        config: t.config,
        providers: t.providers,
        log: pino({ level: 'silent' }),
      });
      const started = Date.now();
      worker.start();
      try {
        await until(
          async () => {
            // Not before its outbox is filled: an empty list would pass `every` at once.
            const rows = await messages(sms.body.data.campaign_id);
            return rows.length === 2 && rows.every((m) => m.status === 'delivered');
          },
          'the SMS to be delivered',
          10_000,
        );
        // Delivered while the first email's call is still open.
        expect(Date.now() - started).toBeLessThan(TIMEOUT_MS);
        expect((await messages(email.body.data.campaign_id)).map((m) => m.status)).toEqual([
          'queued',
          'queued',
        ]);
        // Each email: a call given up after the timeout and never made again (the server may have the message).
        await until(
          async () => (await messages(email.body.data.campaign_id)).every((m) => m.status === 'sent'),
          'the emails to be recorded sent, unconfirmed',
          30_000,
        );
        await new Promise((resolve) => setTimeout(resolve, 1500));
        expect(hanging).toBe(2);
      } finally {
        await worker.stop();
      }
      for (const m of await messages(email.body.data.campaign_id)) {
        expect(m.attempts).toBe(1);
        expect(m.provider_message_id).toBeNull();
        expect(m.error).toMatch(
          /smtp did not answer within 1 s: the message may have gone, and is not sent again/,
        );
      }
      const before = await call(t.app, 'GET', '/api/user', { token: owner.token });
      expect(before.body.data.credits.email_credits).toBe(98);
      // No report within UNCONFIRMED_AFTER_HOURS: failed and refunded.
      const later = new DeliveryWorker({
        db: t.db,
        config: { ...t.config, delivery: { ...t.config.delivery, unconfirmedAfterMs: 0 } },
        providers: t.providers,
        log: pino({ level: 'silent' }),
      });
      expect(await later.failUnconfirmed()).toBeGreaterThanOrEqual(2);
      for (const m of await messages(email.body.data.campaign_id)) {
        expect(m.status).toBe('failed');
        expect(m.error_code).toBe('undeliverable');
      }
      const user = await call(t.app, 'GET', '/api/user', { token: owner.token });
      expect(user.body.data.credits.email_credits).toBe(100);
    });

    it('a direct send to a hung provider answers within the timeout: sent, unconfirmed, not refunded (the provider may have it)', async () => {
      const owner = await register(t.app);
      const started = Date.now();
      const res = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'email', to: 'hang.send@example.com', subject: 'x', message: 'x' },
      });
      expect(res.status).toBe(201);
      expect(Date.now() - started).toBeLessThan(TIMEOUT_MS + 1000);
      expect(res.body.data).toMatchObject({ status: 'sent', provider_message_id: null });
      const message = await call(t.app, 'GET', `/api/messages/${res.body.data.id}`, { token: owner.token });
      expect(message.body.data.status).toBe('sent');
      const user = await call(t.app, 'GET', '/api/user', { token: owner.token });
      expect(user.body.data.credits.email_credits).toBe(99);
    });
  });
}

describe('PROVIDER_TIMEOUT_MS', () => {
  it('defaults to 10 s and must stay within half the lease', () => {
    expect(loadConfig({}).delivery.providerTimeoutMs).toBe(10_000);
    expect(loadConfig({ WORKER_LEASE_SECONDS: '8' }).delivery.providerTimeoutMs).toBe(2000);
    expect(() => loadConfig({ PROVIDER_TIMEOUT_MS: '40000' })).toThrow(
      /PROVIDER_TIMEOUT_MS must be at most half of WORKER_LEASE_SECONDS \(30000 ms\)/,
    );
    expect(() => loadConfig({ PROVIDER_TIMEOUT_MS: 'soon' })).toThrow(/PROVIDER_TIMEOUT_MS/);
  });
});

describe('the SMTP provider', () => {
  it('gives up on a server that accepts the connection but never greets', async () => {
    const sockets: Socket[] = [];
    const server = createServer((socket) => sockets.push(socket));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const provider = new SmtpProvider(
      {
        host: '127.0.0.1',
        port: (server.address() as AddressInfo).port,
        secure: false,
        user: undefined,
        password: undefined,
        from: 'office@example.org',
      },
      500,
    );
    try {
      const started = Date.now();
      const error = await provider
        .send({ channel: 'email', to: 'voter@example.com', body: 'x', subject: 'x' })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderError);
      expect((error as ProviderError).retryable).toBe(true);
      expect(Date.now() - started).toBeLessThan(3000);
    } finally {
      provider.close();
      for (const socket of sockets) socket.destroy();
      server.close();
    }
  });
});
