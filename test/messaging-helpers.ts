import { randomUUID } from 'node:crypto';
import pg from 'pg';
import pino from 'pino';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { connect, type DialectName } from '../src/db/connect.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { createProviders } from '../src/providers/registry.ts';
import type { TestApp } from './helpers.ts';
import { recordStatuses } from './status-recorder.ts';

/**
 * Test files that run delivery workers get a database of their own on PostgreSQL: a worker claims every due
 * message of the database, and another file's worker must not take (and record) this file's messages.
 */
export async function isolatedDatabase(
  dialect: DialectName,
): Promise<{ env: Record<string, string>; drop(): Promise<void> }> {
  const base = process.env.TEST_DATABASE_URL;
  if (dialect === 'sqlite' || !base) return { env: {}, drop: async () => {} };
  const name = `ces_t_${randomUUID().replace(/-/g, '').slice(0, 16)}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    env: { DATABASE_URL: url.toString() },
    drop: async () => {
      const client = new pg.Client({ connectionString: base });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}

/** Polls `check` until it holds (no timing assertion: the deadline only stops a broken test). */
export async function until(check: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Inserts voters straight into the database (test set-up for large segments). */
export async function insertVoters(
  t: TestApp,
  workspaceId: number,
  count: number,
  make: (i: number) => { phone: string; email?: string | null; constituency?: string | null },
): Promise<void> {
  const now = new Date().toISOString();
  for (let start = 0; start < count; start += 1000) {
    const rows = [];
    for (let i = start; i < Math.min(count, start + 1000); i++) {
      const v = make(i);
      rows.push({
        workspace_id: workspaceId,
        name: `Voter ${i}`,
        name_key: `voter ${i}`,
        phone: v.phone,
        email: v.email ?? null,
        constituency: v.constituency ?? null,
        constituency_key: v.constituency?.toLowerCase() ?? null,
        booth: null,
        booth_key: null,
        ward: null,
        ward_key: null,
        address: null,
        created_at: now,
        updated_at: now,
      });
    }
    await t.db.kysely.insertInto('voters').values(rows).execute();
  }
}

/** The application with the providers its configuration names (Twilio, SMTP), not the sandbox of buildTestApp. */
export async function buildProviderTestApp(
  dialect: DialectName,
  env: Record<string, string>,
  /** A logger of the test's own (to read what was logged); silent by default. */
  logger?: pino.Logger,
) {
  const config = loadConfig({
    DATABASE_URL: dialect === 'sqlite' ? 'sqlite::memory:' : process.env.TEST_DATABASE_URL,
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PUBLIC_PER_MIN: '100000',
    RATE_LIMIT_AUTHENTICATED_PER_MIN: '100000',
    RATE_LIMIT_AUTH_PER_MIN: '100000',
    RATE_LIMIT_AUTH_IP_PER_MIN: '100000',
    // Quiet hours (on by default) would hold bulk deliveries at night in India; their tests turn them on.
    QUIET_HOURS: '',
    ...env,
  });
  const db = connect(config.databaseUrl);
  await migrateToLatest(db);
  const log = logger ?? pino({ level: 'silent' });
  const providers = createProviders(config, log);
  const app = await buildApp({
    config,
    db,
    providers,
    rateLimitPrefix: `test:${randomUUID()}`,
    ...(logger ? { loggerInstance: logger } : {}),
  });
  recordStatuses(app);
  return {
    app,
    db,
    config,
    providers,
    log,
    close: async () => {
      await app.close();
      for (const p of Object.values(providers)) p.close?.();
      await db.close().catch(() => {});
    },
  };
}
