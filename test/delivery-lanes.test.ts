/**
 * No account delays another's messages (the contract's fourth part, "Seams"): each channel account is a lane
 * of its own, so one workspace's low send_rate_per_second or hanging provider leaves every other workspace's
 * messages untouched; a single send waiting on its account's pace never outlives its lease (each message is
 * handed to one call); a MSG91 batch with one refused number fails that number alone.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { AccountPace, PaceUnavailable } from '../src/modules/sending/accounts.ts';
import {
  type Account,
  buildTestApp,
  call,
  dialects,
  redisUrl,
  register,
  type TestApp,
  uniquePhone,
} from './helpers.ts';
import { isolatedDatabase, until } from './messaging-helpers.ts';

const silent = pino({ level: 'silent' });
const AUTHKEY = 'msg91-lanes-key';
const HANGING = 'msg91-hanging-key';

interface Flow {
  at: number;
  mobiles: string[];
}

/**
 * MSG91's Flow API as documented (POST /api/v5/flow, header authkey; `{ type: "success", message: <request id> }`),
 * with two behaviours of the real gateway the tests need: the whole request is refused (400, code 202: invalid mobile number) when one of its
 * numbers is one it will not take (here: ending 9999), and the `HANGING` authkey's requests are never answered.
 */
async function msg91Double() {
  const flows: Flow[] = [];
  const held: ServerResponse[] = [];
  let n = 0;
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      if (req.headers.authkey === HANGING) return void held.push(res);
      const body = JSON.parse(raw) as { recipients: Array<{ mobiles: string }> };
      const mobiles = body.recipients.map((r) => r.mobiles);
      res.writeHead(mobiles.some((m) => m.endsWith('9999')) ? 400 : 200, {
        'content-type': 'application/json',
      });
      if (mobiles.some((m) => m.endsWith('9999')))
        return void res.end(JSON.stringify({ type: 'error', message: 'Invalid mobile number', code: '202' }));
      flows.push({ at: Date.now(), mobiles });
      n += 1;
      res.end(JSON.stringify({ type: 'success', message: `lane${String(n).padStart(20, '0')}` }));
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    flows,
    sentTo: (numbers: string[]) =>
      flows.flatMap((f) => f.mobiles).filter((m) => numbers.some((x) => x.slice(1) === m)),
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of held) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

for (const dialect of dialects) {
  describe(`delivery lanes per account (${dialect})`, () => {
    let t: TestApp;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    let msg91: Awaited<ReturnType<typeof msg91Double>>;
    beforeAll(async () => {
      msg91 = await msg91Double();
      database = await isolatedDatabase(dialect);
      t = await buildTestApp(dialect, {
        ...database.env,
        MSG91_BASE_URL: msg91.url,
        WORKER_POLL_MS: '50',
        // A short lease: a single send's wait for its account's pace must not outlive it.
        WORKER_LEASE_SECONDS: '10',
        PROVIDER_TIMEOUT_MS: '5000',
        SANDBOX_DELIVERY_DELAY_MS: '100000',
      });
    });
    afterAll(async () => {
      await t?.close();
      await database?.drop();
      await msg91?.close();
    });

    async function msg91Office(authkey: string, rate: number | null) {
      const owner = await register(t.app);
      const account = await call(t.app, 'POST', '/api/channel-accounts', {
        token: owner.token,
        body: {
          name: 'MSG91',
          provider: 'msg91',
          settings: { sender: 'CESOFC' },
          credentials: { authkey },
          default_for: ['sms'],
          ...(rate ? { send_rate_per_second: rate } : {}),
        },
      });
      expect(account.status, account.raw).toBe(201);
      const template = await call(t.app, 'POST', '/api/templates', {
        token: owner.token,
        body: {
          name: 'Ward meeting',
          channel: 'sms',
          body: 'Ward meeting at 5, {{name}}. -CESOFC',
          provider_template_ids: { msg91: '64f0c2d1e4b0a1b2c3d4e5f6' },
        },
      });
      expect(template.status, template.raw).toBe(201);
      await t.db.kysely
        .updateTable('credit_balances')
        .set({ balance: 10_000 })
        .where('workspace_id', '=', owner.user.workspace_id)
        .execute();
      return {
        owner,
        account: account.body.data as { id: string },
        template: template.body.data.id as string,
      };
    }

    const broadcast = async (owner: Account, body: Record<string, unknown>) => {
      const res = await call(t.app, 'POST', '/api/messages/broadcast', { token: owner.token, body });
      expect(res.status, res.raw).toBe(202);
      return res.body.data.campaign_id as string;
    };
    const statuses = async (campaign: string) =>
      (
        await t.db.kysely
          .selectFrom('messages')
          .select(['status', 'error_code'])
          .where('campaign_id', '=', Number(campaign.slice(5)))
          .execute()
      ).map((m) => m.status);

    /** Another workspace's ten SMS through the deployment's provider: how long until none is queued. */
    async function tenOthers(): Promise<number> {
      const other = await register(t.app);
      const started = Date.now();
      const campaign = await broadcast(other, {
        channel: 'sms',
        message: 'Booth list is out',
        recipients: Array.from({ length: 10 }, () => uniquePhone()),
      });
      await until(
        async () => {
          const now = await statuses(campaign);
          return now.length === 10 && now.every((s) => s !== 'queued');
        },
        "the other workspace's ten SMS to leave queued",
        20_000,
      );
      return Date.now() - started;
    }

    // The drains first: the slow accounts' lanes below leave paced messages behind that a drain would wait for.
    it('one refused number in a MSG91 batch of 20 fails alone (invalid_recipient); retry-failed has nothing to send again', async () => {
      const office = await msg91Office(AUTHKEY, null);
      const numbers = Array.from({ length: 19 }, () => uniquePhone());
      const bad = '+919812349999';
      const campaign = await broadcast(office.owner, {
        channel: 'sms',
        template_id: office.template,
        recipients: [...numbers.slice(0, 7), bad, ...numbers.slice(7)],
      });
      const worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
      await worker.drain();
      const rows = await t.db.kysely
        .selectFrom('messages')
        .select(['to', 'status', 'error_code'])
        .where('campaign_id', '=', Number(campaign.slice(5)))
        .execute();
      expect(rows.filter((r) => r.status === 'sent')).toHaveLength(19);
      expect(rows.filter((r) => r.status === 'failed')).toEqual([
        { to: bad, status: 'failed', error_code: 'invalid_recipient' },
      ]);
      expect(msg91.sentTo(numbers).sort()).toEqual(numbers.map((n) => n.slice(1)).sort());
      const before = msg91.flows.length;
      const retry = await call(t.app, 'POST', `/api/campaigns/${campaign}/retry-failed`, {
        token: office.owner.token,
        body: {},
      });
      // An invalid number is not retried (before, the whole batch failed as provider_rejected and went again).
      expect(retry.status, retry.raw).toBe(409);
      await worker.drain();
      expect(msg91.flows.length).toBe(before);
      expect(msg91.sentTo(numbers)).toHaveLength(19);
    });

    it('a 2-per-second account never gets more than 2 messages in one request', async () => {
      const office = await msg91Office(AUTHKEY, 2);
      const numbers = Array.from({ length: 6 }, () => uniquePhone());
      await broadcast(office.owner, { channel: 'sms', template_id: office.template, recipients: numbers });
      const worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
      await worker.drain();
      const ours = msg91.flows.filter((f) => f.mobiles.some((m) => numbers.some((n) => n.slice(1) === m)));
      expect(ours.flatMap((f) => f.mobiles)).toHaveLength(6);
      expect(Math.max(...ours.map((f) => f.mobiles.length))).toBeLessThanOrEqual(2);
      // 6 at 2 a second: the last request at least 2 s after the first.
      expect(ours.at(-1)!.at - ours[0]!.at).toBeGreaterThanOrEqual(1900);
    });
    for (const [what, authkey, rate] of [
      ['a send_rate_per_second of 1', AUTHKEY, 1],
      ['a provider that hangs', HANGING, null],
    ] as const) {
      it(`${what} on one workspace's account leaves another workspace's ten SMS unqueued within 5 s`, async () => {
        const slow = await msg91Office(authkey, rate);
        // Two campaigns: two calls of the slow account (a hanging one holds each for PROVIDER_TIMEOUT_MS).
        const slowCampaigns: string[] = [];
        for (let i = 0; i < 2; i += 1)
          slowCampaigns.push(
            await broadcast(slow.owner, {
              channel: 'sms',
              template_id: slow.template,
              recipients: Array.from({ length: 30 }, () => uniquePhone()),
            }),
          );
        const worker = new DeliveryWorker({
          db: t.db,
          config: t.config,
          providers: t.providers,
          log: silent,
        });
        worker.start();
        try {
          // The slow account's lane is busy before the other workspace sends.
          await new Promise((resolve) => setTimeout(resolve, 500));
          expect(await tenOthers()).toBeLessThan(5000);
        } finally {
          // The hanging call ends at PROVIDER_TIMEOUT_MS (recorded sent, unconfirmed), the lane with them. What
          // is left of the slow campaign is cancelled, so that the next tests' drains do not wait on it.
          for (const campaign of slowCampaigns)
            await call(t.app, 'POST', `/api/campaigns/${campaign}/cancel`, { token: slow.owner.token });
          await worker.stop();
        }
      }, 30_000);
    }

    it('20 concurrent single sends on a paced account, a worker running: each message handed to one call', async () => {
      // The case: rate 1 and a 10 s lease (before: 29 provider calls for 20 sends).
      const office = await msg91Office(AUTHKEY, 1);
      const worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
      const numbers = Array.from({ length: 20 }, () => uniquePhone());
      worker.start();
      try {
        const answers = await Promise.all(
          numbers.map((to) =>
            call(t.app, 'POST', '/api/messages/send', {
              token: office.owner.token,
              body: { channel: 'sms', to, template_id: office.template },
            }),
          ),
        );
        // Sent within the request, or (no room in the pace within a quarter of the lease) left to the worker.
        for (const answer of answers) {
          expect(answer.status, answer.raw).toBe(201);
          expect(['sent', 'queued']).toContain(answer.body.data.status);
        }
        await until(async () => msg91.sentTo(numbers).length >= 20, 'all twenty to go out', 30_000);
        await new Promise((resolve) => setTimeout(resolve, 1500));
      } finally {
        await worker.stop();
      }
      expect(msg91.sentTo(numbers).sort()).toEqual(numbers.map((n) => n.slice(1)).sort());
    }, 60_000);
  });
}

describe('an account pace that cannot reach Redis', () => {
  it('refuses (PaceUnavailable), never lets the messages go unpaced', async () => {
    const redis = new Redis({
      host: '127.0.0.1',
      port: 1,
      maxRetriesPerRequest: 0,
      lazyConnect: true,
      retryStrategy: () => null,
    });
    redis.on('error', () => {});
    const pace = new AccountPace({ redis, prefix: `test:${randomUUID()}:` });
    await expect(pace.take(1, 5, 1)).rejects.toBeInstanceOf(PaceUnavailable);
    redis.disconnect();
  });

  it.runIf(redisUrl)(
    'shares one schedule between two processes’ paces: 10 at 5 a second take at least 1.8 s',
    async () => {
      const prefix = `test:${randomUUID()}:`;
      const clients = [new Redis(redisUrl!), new Redis(redisUrl!)];
      const paces = clients.map((redis) => new AccountPace({ redis, prefix }));
      const times: number[] = [];
      const started = Date.now();
      await Promise.all(
        paces.map(async (pace) => {
          for (let i = 0; i < 5; i += 1) {
            await pace.take(7, 5, 1);
            times.push(Date.now() - started);
          }
        }),
      );
      for (const redis of clients) redis.disconnect();
      times.sort((a, b) => a - b);
      expect(times.at(-1)!).toBeGreaterThanOrEqual(1750);
    },
  );
});
