import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { logLines } from '../bench/server.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { claimDue } from '../src/modules/sending/outbox.repository.ts';
import { type Account, buildTestApp, call, dialects, register, type TestApp } from './helpers.ts';
import { insertVoters, isolatedDatabase, until } from './messaging-helpers.ts';

const silent = pino({ level: 'silent' });

async function broadcastToSegment(t: TestApp, owner: Account, voters: number, prefix: string) {
  const ws = owner.user.workspace_id;
  await t.db.kysely
    .updateTable('credit_balances')
    .set({ balance: voters })
    .where('workspace_id', '=', ws)
    .execute();
  await insertVoters(t, ws, voters, (i) => ({
    phone: `${prefix}${String(i).padStart(5, '0')}1`,
    constituency: 'East',
  }));
  const seg = await call(t.app, 'POST', '/api/segments', {
    token: owner.token,
    body: { name: 'East', filters: { constituency: 'East' } },
  });
  const res = await call(t.app, 'POST', '/api/messages/broadcast', {
    token: owner.token,
    body: { channel: 'sms', message: 'Polling day is Sunday', segment_id: seg.body.data.id },
  });
  expect(res.status).toBe(202);
  expect(res.body.data.total_recipients).toBe(voters);
  return { campaignId: Number(res.body.data.campaign_id.slice(5)), ref: res.body.data.campaign_id as string };
}

async function statusCounts(t: TestApp, campaignId: number) {
  const rows = await t.db.kysely
    .selectFrom('messages')
    .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
    .where('campaign_id', '=', campaignId)
    .groupBy('status')
    .execute();
  return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)])) as Record<string, number>;
}

for (const dialect of dialects) {
  describe(`delivery worker (${dialect})`, () => {
    let t: TestApp;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      t = await buildTestApp(dialect, {
        ...database.env,
        SANDBOX_DELIVERY_DELAY_MS: '0',
        WORKER_LEASE_SECONDS: '1',
        WORKER_BATCH_SIZE: '50',
      });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
    });

    it('a worker that dies mid-broadcast leaves its claims to the next one: all delivered, none twice', async () => {
      const owner = await register(t.app);
      const { campaignId } = await broadcastToSegment(t, owner, 300, '+919700');
      const first = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
      // The first worker fills the outbox and sends one batch ...
      expect(await first.round()).toBe(true);
      expect((await statusCounts(t, campaignId)).delivered).toBe(50);
      // ... then claims the next batch and dies before sending it (its lease is all that is left of it).
      const now = new Date();
      const held = await claimDue(
        t.db.kysely,
        t.db.dialect,
        first.id,
        now.toISOString(),
        new Date(now.getTime() + 1000).toISOString(),
        50,
      );
      expect(held).toHaveLength(50);
      const restarted = new DeliveryWorker({
        db: t.db,
        config: t.config,
        providers: t.providers,
        log: silent,
      });
      await restarted.drain();
      // Everything but the dead worker's claims went out; those wait for the lease to end ...
      expect(await statusCounts(t, campaignId)).toEqual({ delivered: 250, queued: 50 });
      // ... and are then taken over.
      await until(async () => {
        await restarted.drain();
        return (await statusCounts(t, campaignId)).delivered === 300;
      }, 'the expired claims to be delivered');
      const references = t.providers.sms.sent
        .filter((m) => m.to.startsWith('+919700'))
        .map((m) => m.reference);
      expect(references).toHaveLength(300);
      expect(new Set(references).size).toBe(300);
      const campaign = await call(t.app, 'GET', `/api/campaigns/camp_${campaignId}`, { token: owner.token });
      expect(campaign.body.data).toMatchObject({
        status: 'completed',
        stats: { queued: 0, sent: 0, delivered: 300, failed: 0 },
      });
    });

    it("a channel's claim reads its own channel's due messages, per workspace, from the index, not the whole queue", async () => {
      // The claim's pick, as claimDue builds it for one workspace's share (claimDueFairly): with the channel and
      // the workspace first in the due index, an idle lane does not walk another channel's queue (a
      // 1,000,000-SMS broadcast made each email claim read all of it), nor a workspace another's.
      const pick = t.db.kysely
        .selectFrom('messages')
        .select('id')
        .where('status', '=', 'queued')
        .where('next_attempt_at', '<=', new Date().toISOString())
        .where('channel', '=', 'email')
        .where('workspace_id', '=', 1)
        .orderBy('next_attempt_at')
        .orderBy('id')
        .limit(50)
        .compile();
      const raw = t.db.raw;
      if (raw.dialect === 'sqlite') {
        const plan = (query: string, parameters: readonly unknown[]) =>
          (raw.sqlite.prepare(`EXPLAIN QUERY PLAN ${query}`).all(...parameters) as { detail: string }[])
            .map((r) => r.detail)
            .join('\n');
        const claim = plan(pick.sql, pick.parameters);
        expect(claim).toContain('messages_due_workspace_idx');
        expect(claim).not.toMatch(/TEMP B-TREE/);
        // The loose scan for the workspaces with due messages: one seek per workspace on the same index.
        const seek = plan(
          `SELECT workspace_id FROM messages WHERE status = 'queued' AND channel = ? AND workspace_id > ?
           AND next_attempt_at <= ? ORDER BY channel, workspace_id LIMIT 1`,
          ['email', 0, new Date().toISOString()],
        );
        expect(seek).toContain('messages_due_workspace_idx');
        expect(seek).not.toMatch(/TEMP B-TREE/);
      } else {
        // PostgreSQL's planner picks by the statistics of a test database, which is too small to prefer any
        // index: the index itself is checked instead.
        const { rows } = await raw.pool.query<{ indexname: string; indexdef: string }>(
          `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'messages' AND indexname LIKE 'messages_due%'`,
        );
        expect(rows).toHaveLength(1);
        expect(rows[0]!.indexname).toBe('messages_due_workspace_idx');
        expect(rows[0]!.indexdef).toMatch(
          /\(channel, workspace_id, next_attempt_at, id\) WHERE \(\(?status\)?::text = 'queued'/,
        );
      }
    });

    it('stopping a worker releases its unsent claims at once', async () => {
      const paced = await buildTestApp(dialect, {
        ...database.env,
        SANDBOX_DELIVERY_DELAY_MS: '0',
        SANDBOX_SEND_RATE: '100',
        WORKER_LEASE_SECONDS: '60',
        WORKER_BATCH_SIZE: '100',
        WORKER_POLL_MS: '10',
      });
      try {
        const owner = await register(paced.app);
        const { campaignId } = await broadcastToSegment(paced, owner, 200, '+919710');
        const worker = new DeliveryWorker({
          db: paced.db,
          config: paced.config,
          providers: paced.providers,
          log: silent,
        });
        worker.start();
        await until(
          async () => ((await statusCounts(paced, campaignId)).delivered ?? 0) > 0,
          'a first delivery',
        );
        await worker.stop();
        const held = await paced.db.kysely
          .selectFrom('messages')
          .select('id')
          .where('claimed_by', '=', worker.id)
          .where('status', '=', 'queued')
          .execute();
        expect(held).toHaveLength(0);
        const after = new DeliveryWorker({
          db: paced.db,
          config: paced.config,
          providers: paced.providers,
          log: silent,
        });
        await until(async () => {
          await after.drain();
          return (await statusCounts(paced, campaignId)).delivered === 200;
        }, 'all 200 delivered');
        const references = paced.providers.sms.sent
          .filter((m) => m.to.startsWith('+919710'))
          .map((m) => m.reference);
        expect(new Set(references).size).toBe(200);
        expect(references).toHaveLength(200);
      } finally {
        await paced.close();
      }
    });
  });
}

/** A `npm run worker` process whose sandbox log lines (one per message handed over) are collected. */
function workerProcess(env: Record<string, string>) {
  const sends: string[] = [];
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/worker.ts'], {
    env: {
      PATH: process.env.PATH ?? '',
      APP_KEY: '0'.repeat(64),
      LOG_LEVEL: 'info',
      SANDBOX_DELIVERY_DELAY_MS: '0',
      QUIET_HOURS: '',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let buffer = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    buffer += chunk.toString('utf8');
    const parts = buffer.split('\n');
    buffer = parts.pop() ?? '';
    for (const part of parts) {
      if (!part.trim()) continue;
      const line = JSON.parse(part) as { msg?: string; reference?: string };
      if (line.msg === 'sandbox message') sends.push(String(line.reference));
    }
  });
  const exited = once(child, 'exit');
  return { child, sends, exited };
}

for (const dialect of dialects) {
  describe(`a worker process killed mid-broadcast (${dialect})`, () => {
    it(
      'is replaced: every message delivered; sent twice only inside the documented window',
      { timeout: 120_000 },
      async () => {
        const database = await isolatedDatabase(dialect);
        const file = join(tmpdir(), `ces-kill-${randomUUID()}.db`);
        const url = dialect === 'sqlite' ? `sqlite:${file}` : (database.env.DATABASE_URL as string);
        const t = await buildTestApp(dialect, { DATABASE_URL: url });
        const env = {
          DATABASE_URL: url,
          SANDBOX_SEND_RATE: '1000',
          WORKER_BATCH_SIZE: '100',
          WORKER_LEASE_SECONDS: '2',
          WORKER_POLL_MS: '20',
        };
        const first = workerProcess(env);
        let second: ReturnType<typeof workerProcess> | undefined;
        try {
          const owner = await register(t.app);
          const { campaignId } = await broadcastToSegment(t, owner, 3000, '+919730');
          await until(
            async () => ((await statusCounts(t, campaignId)).delivered ?? 0) >= 500,
            '500 delivered',
          );
          first.child.kill('SIGKILL');
          await first.exited;
          const atKill = await statusCounts(t, campaignId);
          expect(atKill.delivered ?? 0).toBeLessThan(3000);
          second = workerProcess(env);
          await until(
            async () => (await statusCounts(t, campaignId)).delivered === 3000,
            'all 3,000 delivered after the restart',
            100_000,
          );
          second.child.kill('SIGTERM');
          await second.exited;
          expect(new Set(first.sends).size).toBe(first.sends.length);
          expect(new Set(second.sends).size).toBe(second.sends.length);
          const seen = new Set([...first.sends, ...second.sends]);
          expect(seen.size).toBe(3000);
          // A message both sent is one the killed worker handed over in its last moments and never recorded:
          // the restarted worker's hand-over is the one on the row. That is the README's one window.
          const twice = first.sends.filter((ref) => second?.sends.includes(ref));
          expect(twice.length).toBeLessThanOrEqual(20);
          for (const ref of twice) {
            const row = await t.db.kysely
              .selectFrom('messages')
              .select(['attempts', 'status'])
              .where('id', '=', Number(ref.slice(4)))
              .executeTakeFirstOrThrow();
            expect(row).toMatchObject({ status: 'delivered', attempts: 2 });
          }
        } finally {
          for (const w of [first, second]) if (w && w.child.exitCode === null) w.child.kill('SIGKILL');
          await t.close();
          await database.drop();
          for (const suffix of ['', '-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
        }
      },
    );
  });
}

describe.runIf(dialects.includes('postgres'))('two worker processes on PostgreSQL', () => {
  // A correctness test (nothing lost, nothing twice), not a speed one (bench:messaging measures the drain): its
  // wait only guards against a hang, and stays long enough for a loaded CI machine.
  it('share a 20,000-recipient broadcast and send no message twice', { timeout: 330_000 }, async () => {
    const database = await isolatedDatabase('postgres');
    const t = await buildTestApp('postgres', database.env);
    const workers: ChildProcess[] = [];
    try {
      const owner = await register(t.app);
      const { campaignId } = await broadcastToSegment(t, owner, 20_000, '+919720');
      const lines: Array<Array<Record<string, unknown>>> = [[], []];
      for (const n of [0, 1]) {
        const child = spawn(process.execPath, ['--import', 'tsx', 'src/worker.ts'], {
          env: {
            PATH: process.env.PATH,
            DATABASE_URL: database.env.DATABASE_URL,
            APP_KEY: '0'.repeat(64),
            LOG_LEVEL: 'info',
            SANDBOX_DELIVERY_DELAY_MS: '0',
            QUIET_HOURS: '',
            SANDBOX_SEND_RATE: '2500',
            WORKER_BATCH_SIZE: '200',
            WORKER_POLL_MS: '20',
          },
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        lines[n] = logLines(child);
        workers.push(child);
      }
      await until(
        async () => (await statusCounts(t, campaignId)).delivered === 20_000,
        'all 20,000 delivered',
        300_000,
      );
      for (const child of workers) child.kill('SIGTERM');
      await Promise.all(
        workers.map((child) => (child.exitCode === null ? once(child, 'exit') : Promise.resolve())),
      );
      const sends = lines.map((l) =>
        l.filter((e) => e.msg === 'sandbox message').map((e) => String(e.reference)),
      );
      expect(sends[0]?.length).toBeGreaterThan(0);
      expect(sends[1]?.length).toBeGreaterThan(0);
      const all = [...(sends[0] ?? []), ...(sends[1] ?? [])];
      expect(all).toHaveLength(20_000);
      expect(new Set(all).size).toBe(20_000);
    } finally {
      for (const child of workers) if (child.exitCode === null) child.kill('SIGKILL');
      await t.close();
      await database.drop();
    }
  });
});
