/**
 * npm run bench:state — issue 25: a state's voter roll on one PostgreSQL. Not in CI: at full size it takes
 * about 40 minutes and 16 GB of disk on two cores (2,000,000 voters: 15 minutes and 3.5 GB).
 *
 * On a database of its own (created beside DATABASE_URL's, or TEST_DATABASE_URL's, and dropped at the end
 * unless STATE_KEEP=1), with the real processes (`npm start` without in-process workers, and two
 * `npm run worker` processes; REDIS_URL, when set, is passed to all three):
 *   1. STATE_VOTERS (10,000,000) generated voters across STATE_CONSTITUENCIES (300) constituencies, the first
 *      holding STATE_BROADCAST (1,000,000) of them, imported through an import job (`Prefer: respond-async`),
 *      against PostgreSQL's own COPY of the same file into a table with the same indexes (goal: at least 0.5x);
 *      then it waits for the `VACUUM (ANALYZE)` the service starts in the background after a large import,
 *      and reports how long that ran on (STATE_WAIT_VACUUM=0: go on at once, reading a roll still vacuumed);
 *   2. filtered voter lists (constituency, booth, ward and their combinations), STATE_QUERIES (1,000) distinct
 *      filters, each asked once (goal: p99 at most 25 ms), and as many distinct searches by name, phone digits
 *      and email (goal: p99 at most 50 ms); then mixed reads (a voter, a list, a search) from 50 connections
 *      for 30 s (goal: p99 under 100 ms);
 *   3. the whole roll exported as CSV (goal: at least 150,000 rows/s) and Excel (at least 100,000 rows/s), with
 *      the API process's RSS read every 100 ms (goal: under 300 MB throughout);
 *   4. a broadcast to the first constituency's segment: the 202 (goal: under a second), the outbox filled
 *      (goal: at least 100,000 rows/s) and drained through the sandbox by the two workers (goal: at least
 *      10,000 messages/s), each recipient once, and the credits exact;
 *   5. the voter record's tables at that scale (bench/state-record.ts): lists filtered by a tag or a custom field
 *      (goal: p99 at most 50 ms), 1,000,000 survey responses grouped by booth (at most 1 s), 1,000,000 visits and
 *      5,000,000 poll-day marks counted as turnout by booth (at most 200 ms).
 * The figures go to stdout, bench/out/state.md and bench/results/<date>-state.json.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { resolve } from 'node:path';
import pg from 'pg';
import { constituencyName, generateVotersCsv } from './generate.ts';
import { type Latencies, listFilters, type MixedReads, mixedReads, searchTerms, timeEach } from './reads.ts';
import { type RecordFigures, recordRows, recordTables } from './state-record.ts';
import {
  api,
  ensureBuilt,
  freePort,
  keepResults,
  machine,
  npmStart,
  uploadCsv,
  waitUntilUp,
} from './server.ts';

const VOTERS = Number(process.env.STATE_VOTERS ?? 10_000_000);
const CONSTITUENCIES = Number(process.env.STATE_CONSTITUENCIES ?? 300);
const BROADCAST = Math.min(VOTERS, Number(process.env.STATE_BROADCAST ?? 1_000_000));
const QUERIES = Number(process.env.STATE_QUERIES ?? 1000);
/**
 * STATE_WAIT_VACUUM=0: read straight after the import job completes, while the service's background
 * `VACUUM (ANALYZE)` of the new roll still runs (by default the bench waits for it and reports its length).
 */
const waitForVacuum = process.env.STATE_WAIT_VACUUM !== '0';
/** STATE_STEPS: which of reads, exports, broadcast, record to run after the import (all by default). */
const steps = new Set(
  (process.env.STATE_STEPS ?? 'reads,exports,broadcast,record').split(',').map((x) => x.trim()),
);
const adminUrl = [process.env.DATABASE_URL, process.env.TEST_DATABASE_URL].find((u) =>
  /^postgres(ql)?:\/\//.test(u ?? ''),
);
if (!adminUrl) {
  console.error(
    'bench:state runs on PostgreSQL: set DATABASE_URL (or TEST_DATABASE_URL) to a postgres:// URL.',
  );
  process.exit(1);
}
/** STATE_DATABASE names a database a run kept (STATE_KEEP=1): its import is not done again. */
const reused = process.env.STATE_DATABASE;
const dbName = reused ?? `ces_state_${Date.now()}`;
const PASSWORD = 'state benchmark password';
const url = new URL(adminUrl);
url.pathname = `/${dbName}`;
const databaseUrl = url.toString();
const csvPath = resolve(`bench/out/state-voters-${VOTERS}-${CONSTITUENCIES}.csv`);

const children: ChildProcess[] = [];
function start(entry: 'server' | 'worker', env: Record<string, string>): ChildProcess {
  const { env: startEnv, args } = npmStart();
  const child = spawn(process.execPath, [...args.slice(0, -1), `dist/${entry}.js`], {
    env: {
      ...process.env,
      ...startEnv,
      DATABASE_URL: databaseUrl,
      REDIS_URL: process.env.REDIS_URL ?? '',
      REDIS_PREFIX: `${dbName}:`,
      APP_KEY: 'a'.repeat(64),
      LOG_LEVEL: 'warn',
      QUIET_HOURS: '',
      SANDBOX_DELIVERY_DELAY_MS: '0',
      WORKER_IN_PROCESS: 'false',
      // A state's roll is a file of about 1 GB: the workers run the import job, so they need it too.
      IMPORT_MAX_BYTES: String(4 * 1024 * 1024 * 1024),
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  return child;
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const s = (ms: number) => (ms / 1000).toFixed(1);

/** Downloads `path`, counting rows (lines) and reading the API process's RSS every 100 ms. */
function download(base: string, path: string, token: string, pid: number) {
  return new Promise<{ ms: number; bytes: number; peakRssMb: number }>((done, fail) => {
    const started = performance.now();
    let peak = 0;
    const sample = () => {
      const rss = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
      peak = Math.max(peak, Math.round(rss / 1024));
    };
    const timer = setInterval(sample, 100);
    httpRequest(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } }, (res) => {
      if (res.statusCode !== 200) fail(new Error(`GET ${path}: ${res.statusCode}`));
      let bytes = 0;
      res.on('data', (chunk: Buffer) => (bytes += chunk.length));
      // A body cut short (the server failed mid-stream) ends in 'aborted', never in 'end'.
      res.on('aborted', () => fail(new Error(`GET ${path}: the body was cut short after ${bytes} bytes`)));
      res.on('end', () => {
        clearInterval(timer);
        sample();
        done({ ms: performance.now() - started, bytes, peakRssMb: peak });
      });
    })
      .on('error', fail)
      .end();
  });
}

/**
 * The reference: psql's \copy of the same file into a table like `voters` (its indexes), keys computed, and
 * its searchable columns into a table like `voter_search` (its trigram indexes): what the import job writes.
 */
function referenceCopy(): number {
  const script = `CREATE TABLE state_reference (LIKE voters INCLUDING ALL);
CREATE TEMP TABLE staging (name text, phone text, email text, constituency text, booth text, ward text, address text);
\\copy staging FROM '${csvPath}' CSV HEADER
INSERT INTO state_reference (workspace_id, name, name_key, phone, email, constituency, constituency_key, booth, ward, address, created_at, updated_at)
  SELECT 1, name, lower(name), phone, nullif(email, ''), constituency, lower(constituency), booth, ward, address, now(), now() FROM staging;
CREATE TABLE state_reference_search (LIKE voter_search INCLUDING ALL);
INSERT INTO state_reference_search SELECT id, workspace_id, name, email, phone FROM state_reference;`;
  const started = performance.now();
  execFileSync('psql', [databaseUrl, '-q', '-v', 'ON_ERROR_STOP=1'], {
    input: script,
    stdio: ['pipe', 'ignore', 'inherit'],
  });
  const ms = performance.now() - started;
  execFileSync('psql', [databaseUrl, '-qc', 'DROP TABLE state_reference, state_reference_search']);
  return ms;
}

/** The whole roll as CSV, then as Excel, with the API process's RSS read all along. */
async function exports(base: string, token: string, pid: number, results: Record<string, unknown>) {
  console.log('3. exports ...');
  const csv = await download(base, '/api/voters/export?format=csv', token, pid);
  const excel = await download(base, '/api/voters/export?format=excel', token, pid);
  results.export = {
    csv: {
      seconds: +(csv.ms / 1000).toFixed(1),
      rows_per_s: Math.round(VOTERS / (csv.ms / 1000)),
      peak_rss_mb: csv.peakRssMb,
    },
    excel: {
      seconds: +(excel.ms / 1000).toFixed(1),
      rows_per_s: Math.round(VOTERS / (excel.ms / 1000)),
      peak_rss_mb: excel.peakRssMb,
    },
  };
  console.log(`   ${JSON.stringify(results.export)}`);
}

/** A broadcast to the big constituency, drained by the two workers; nobody twice, credits exact. */
async function broadcast(
  base: string,
  token: string,
  workspaceId: number,
  db: pg.Pool,
  results: Record<string, unknown>,
) {
  console.log(`4. broadcast to ${fmt(BROADCAST)} voters ...`);
  execFileSync(
    process.execPath,
    ['bin/ces.mjs', 'grant-credits', '--workspace', String(workspaceId), '--sms', String(BROADCAST * 2)],
    {
      env: { ...process.env, DATABASE_URL: databaseUrl },
      stdio: 'ignore',
    },
  );
  const balance = async () =>
    Number(
      (
        await db.query('SELECT balance FROM credit_balances WHERE workspace_id = $1 AND channel = $2', [
          workspaceId,
          'sms',
        ])
      ).rows[0]?.balance,
    );
  // The credits are compared once nothing of the workspace is in flight: a message settled as failed (the
  // sandbox fails a few) is refunded when it settles, so an earlier run's leftovers and this run's own
  // settlements must be over before each reading.
  const settled = async () => {
    for (;;) {
      const busy = await db.query(
        `SELECT 1 FROM messages WHERE workspace_id = $1 AND status IN ('queued', 'sending', 'sent') LIMIT 1`,
        [workspaceId],
      );
      if (!busy.rowCount) return;
      await new Promise((r) => setTimeout(r, 1000));
    }
  };
  await settled();
  const before = await balance();
  const segment = await api(`${base}/api`, 'POST', '/segments', token, {
    name: 'The first constituency',
    filters: { constituency: constituencyName(0) },
  });
  const started = performance.now();
  const broadcast = await api(`${base}/api`, 'POST', '/messages/broadcast', token, {
    channel: 'sms',
    message: 'Polling day is Sunday. Your booth opens at 7.',
    segment_id: segment.id,
  });
  const acceptMs = performance.now() - started;
  const total = Number(broadcast.total_recipients);
  const campaignId = Number(String(broadcast.campaign_id ?? broadcast.id).replace(/^camp_/, ''));
  const count = async (where: string) =>
    Number(
      (await db.query(`SELECT count(*) AS n FROM messages WHERE campaign_id = $1 ${where}`, [campaignId]))
        .rows[0].n,
    );
  // The watching must not load the database it measures: the campaign's status (the fill ends when it moves
  // from queued to sending), then one indexed probe a second for anything left to send. (A count of a million
  // rows every 200 ms halved the drain in the first run; counting the outbox every 250 ms until it was full
  // was an eighth of the database's time during the fill at 10,000,000 voters.)
  let filledMs = 0;
  while (!filledMs) {
    const { rows } = await db.query('SELECT status FROM campaigns WHERE id = $1', [campaignId]);
    if (rows[0]?.status !== 'queued') filledMs = performance.now() - started;
    else await new Promise((r) => setTimeout(r, 250));
  }
  const left = async () =>
    (
      await db.query(
        `SELECT 1 FROM messages WHERE campaign_id = $1 AND status IN ('queued', 'sending') LIMIT 1`,
        [campaignId],
      )
    ).rowCount ?? 0;
  while ((await left()) > 0) await new Promise((r) => setTimeout(r, 1000));
  const drainedMs = performance.now() - started;
  const distinct = Number(
    (await db.query('SELECT count(DISTINCT "to") AS n FROM messages WHERE campaign_id = $1', [campaignId]))
      .rows[0].n,
  );
  const rows = await count('');
  await settled();
  const spent = Number(
    (
      await db.query(
        `SELECT coalesce(sum(cost), 0) AS n FROM messages WHERE campaign_id = $1 AND status = 'delivered'`,
        [campaignId],
      )
    ).rows[0].n,
  );
  const after = await balance();
  results.broadcast = {
    recipients: total,
    accept_ms: Math.round(acceptMs),
    fill_rows_per_s: Math.round(total / (filledMs / 1000)),
    drain_per_s: Math.round(total / (drainedMs / 1000)),
    sent_twice: rows - distinct,
    credits_spent: before - after,
    credits_for_sent: spent,
    credits_exact: before - after === spent,
  };
  console.log(`   ${JSON.stringify(results.broadcast)}`);
}

/** The reference COPY, then the import job through the API; the new workspace's token and id. */
async function importRoll(
  base: string,
  db: pg.Pool,
  results: Record<string, unknown>,
): Promise<[string, number]> {
  const mb = Math.round(statSync(csvPath).size / 1024 / 1024);
  console.log(`1. import of ${fmt(VOTERS)} voters (${mb} MB): the reference COPY ...`);
  const copyMs = referenceCopy();
  const account = await api(`${base}/api`, 'POST', '/auth/register', undefined, {
    name: 'State Office',
    email: `state-${Date.now()}@example.com`,
    password: PASSWORD,
  });
  const token = account.access_token as string;
  const workspaceId = (account.user as { workspace_id: number }).workspace_id;
  console.log('   ... and the import job');
  const since = (await db.query<{ now: Date }>('SELECT now()')).rows[0]?.now ?? new Date();
  const started = performance.now();
  const upload = await uploadCsv(`${base}/api`, csvPath, token, { prefer: 'respond-async' });
  if (upload.status !== 202) throw new Error(`import: ${upload.status} ${upload.body.slice(0, 300)}`);
  const accepted = performance.now() - started;
  const location = String(upload.headers.location).replace(/^\/api/, '');
  let job: Record<string, unknown>;
  for (;;) {
    job = await api(`${base}/api`, 'GET', location, token);
    if (job.status === 'completed' || job.status === 'failed') break;
    await new Promise((r) => setTimeout(r, 500));
  }
  const importMs = performance.now() - started;
  if (job.status !== 'completed') throw new Error(`import job: ${JSON.stringify(job)}`);
  results.import = {
    upload_202_ms: Math.round(accepted),
    seconds: +(importMs / 1000).toFixed(1),
    rows_per_s: Math.round(VOTERS / (importMs / 1000)),
    copy_seconds: +(copyMs / 1000).toFixed(1),
    ratio: +(copyMs / importMs).toFixed(2),
    job,
  };
  console.log(
    `   import job ${s(importMs)} s against COPY ${s(copyMs)} s: ${(copyMs / importMs).toFixed(2)}x`,
  );
  if (waitForVacuum) {
    const vacuumMs = await afterImportVacuum(db, since);
    (results.import as Record<string, unknown>).vacuum_after_seconds = +(vacuumMs / 1000).toFixed(1);
    console.log(
      `   the service's VACUUM (ANALYZE) after the import ran ${s(vacuumMs)} s more; waited for it`,
    );
  }

  return [token, workspaceId];
}

/**
 * How long the service's `VACUUM (ANALYZE)` after a large import (started in the background when the job
 * commits) runs on after the job is completed (`since`: the database's clock before the upload); it returns
 * when `voter_search` (vacuumed last) shows a vacuum since then and none runs. 0 when none comes within 10 s.
 */
async function afterImportVacuum(db: pg.Pool, since: Date): Promise<number> {
  const started = performance.now();
  for (;;) {
    const { rows } = await db.query<{ running: boolean; done: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND state = 'active'
                      AND query ILIKE 'VACUUM%') AS running,
              COALESCE((SELECT last_vacuum >= $1 FROM pg_stat_user_tables WHERE relname = 'voter_search'),
                       false) AS done`,
      [since],
    );
    const { running, done } = rows[0] ?? { running: false, done: false };
    if (!running && done) return performance.now() - started;
    if (!running && performance.now() - started > 10_000) return 0;
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function main(): Promise<void> {
  if (!existsSync(csvPath)) {
    console.log(`generating ${fmt(VOTERS)} voters -> ${csvPath}`);
    await generateVotersCsv(csvPath, VOTERS, {
      constituencies: CONSTITUENCIES,
      firstShare: BROADCAST / VOTERS,
    });
  }
  const mb = Math.round(statSync(csvPath).size / 1024 / 1024);
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  if (!reused) await admin.query(`CREATE DATABASE ${dbName}`);
  const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const results: Record<string, unknown> = {
    machine: machine(),
    voters: VOTERS,
    constituencies: CONSTITUENCIES,
    csv_mb: mb,
  };
  try {
    ensureBuilt();
    const server = start('server', {
      PORT: String(port),
      HOST: '127.0.0.1',
      RATE_LIMIT_AUTHENTICATED_PER_MIN: '100000000',
    });
    await waitUntilUp(`${base}/api/healthz`, 900);
    for (let i = 0; i < 2; i++) start('worker', { WORKER_BATCH_SIZE: '2000' });

    let token: string;
    let workspaceId: number;
    if (reused) {
      const owner = await db.query<{ email: string; workspace_id: number }>(
        `SELECT email, workspace_id FROM users WHERE email LIKE 'state-%' ORDER BY id LIMIT 1`,
      );
      const row = owner.rows[0];
      if (!row) throw new Error(`${dbName} holds no state office: run without STATE_DATABASE first`);
      token = (
        await api(`${base}/api`, 'POST', '/auth/login', undefined, { email: row.email, password: PASSWORD })
      ).access_token as string;
      workspaceId = row.workspace_id;
      console.log(`1. import: skipped, ${dbName} reused`);
    } else {
      [token, workspaceId] = await importRoll(base, db, results);
    }
    if (steps.has('reads')) {
      console.log(`2. ${QUERIES} distinct list filters and ${QUERIES} distinct searches, each once ...`);
      results.lists = await timeEach(`${base}/api`, listFilters(QUERIES, CONSTITUENCIES), token);
      results.search = await timeEach(`${base}/api`, searchTerms(csvPath, QUERIES), token);
      console.log(`   lists ${JSON.stringify(results.lists)}\n   search ${JSON.stringify(results.search)}`);
      results.mixed = await mixedReads(
        `${base}/api`,
        token,
        listFilters(QUERIES, CONSTITUENCIES),
        searchTerms(csvPath, QUERIES),
        {
          connections: Number(process.env.STATE_MIXED_CONNECTIONS ?? 50),
          seconds: Number(process.env.STATE_MIXED_S ?? 30),
        },
      );
      console.log(`   mixed reads ${JSON.stringify(results.mixed)}`);
    }
    if (steps.has('exports')) await exports(base, token, server.pid as number, results);
    if (steps.has('broadcast')) await broadcast(base, token, workspaceId, db, results);
    if (steps.has('record')) {
      results.record = await recordTables(base, token, workspaceId, db, {
        voters: VOTERS,
        queries: QUERIES,
        constituencies: CONSTITUENCIES,
      });
    }
  } finally {
    for (const child of children) child.kill('SIGTERM');
    for (const child of children)
      if (child.exitCode === null) await new Promise((r) => child.once('exit', r));
    await db.end();
    if (process.env.STATE_KEEP !== '1' && !reused) await admin.query(`DROP DATABASE IF EXISTS ${dbName}`);
    await admin.end();
  }
  const date = new Date().toISOString().slice(0, 10);
  keepResults('-state', results);
  writeFileSync('bench/out/state.md', table(results, date) + '\n');
  console.log(`\n${table(results, date)}`);
}

function table(r: Record<string, unknown>, date: string): string {
  const im = r.import as
    | {
        seconds: number;
        rows_per_s: number;
        copy_seconds: number;
        ratio: number;
        vacuum_after_seconds?: number;
      }
    | undefined;
  const li = r.lists as Latencies | undefined;
  const se = r.search as Latencies | undefined;
  const mi = r.mixed as MixedReads | undefined;
  const ex = r.export as
    Record<'csv' | 'excel', { seconds: number; rows_per_s: number; peak_rss_mb: number }> | undefined;
  const br = r.broadcast as
    | {
        accept_ms: number;
        fill_rows_per_s: number;
        drain_per_s: number;
        sent_twice: number;
        credits_exact: boolean;
        recipients: number;
      }
    | undefined;
  const yes = (ok: boolean) => (ok ? 'yes' : '**no**');
  return [
    `### bench:state, PostgreSQL, ${fmt(VOTERS)} voters in ${CONSTITUENCIES} constituencies, ${date}`,
    '',
    '| measure | figure | reference / goal | met |',
    '| --- | --- | --- | --- |',
    im
      ? `| import job | ${im.seconds} s, ${fmt(im.rows_per_s)} rows/s | COPY ${im.copy_seconds} s: ratio ${im.ratio}x, goal >= 0.5x | ${yes(im.ratio >= 0.5)} |`
      : `| import job | (not run: STATE_DATABASE=${dbName} reused) | | |`,
    ...(im?.vacuum_after_seconds !== undefined
      ? [
          `| the service's VACUUM (ANALYZE) after it (waited for before the reads) | ${im.vacuum_after_seconds} s more | (not a goal) | |`,
        ]
      : []),
    ...(li && se && mi
      ? [
          `| ${li.n} filtered lists, each once | p50 ${li.p50.toFixed(1)} ms, p99 ${li.p99.toFixed(1)} ms, max ${li.max.toFixed(0)} ms | p99 <= 25 ms | ${yes(li.p99 <= 25)} |`,
          `| ${se.n} searches, each once | p50 ${se.p50.toFixed(1)} ms, p99 ${se.p99.toFixed(1)} ms, max ${se.max.toFixed(0)} ms | p99 <= 50 ms | ${yes(se.p99 <= 50)} |`,
          `| mixed reads (voter, list, search), ${mi.connections} connections, ${mi.seconds} s | ${fmt(mi.per_s)}/s, p50 ${mi.p50_ms} ms, p99 ${mi.p99_ms} ms, ${mi.failed} failed | p99 < 100 ms | ${yes(mi.p99_ms < 100 && mi.failed === 0)} |`,
        ]
      : []),
    ...(ex
      ? [
          `| CSV export | ${ex.csv.seconds} s, ${fmt(ex.csv.rows_per_s)} rows/s, RSS peak ${ex.csv.peak_rss_mb} MB | >= 150,000 rows/s, RSS < 300 MB | ${yes(ex.csv.rows_per_s >= 150_000 && ex.csv.peak_rss_mb < 300)} |`,
          `| Excel export | ${ex.excel.seconds} s, ${fmt(ex.excel.rows_per_s)} rows/s, RSS peak ${ex.excel.peak_rss_mb} MB | >= 100,000 rows/s, RSS < 300 MB | ${yes(ex.excel.rows_per_s >= 100_000 && ex.excel.peak_rss_mb < 300)} |`,
        ]
      : []),
    ...(br
      ? [
          `| broadcast to ${fmt(br.recipients)}: 202 | ${br.accept_ms} ms | < 1,000 ms | ${yes(br.accept_ms < 1000)} |`,
          `| outbox filled (from the 202) | ${fmt(br.fill_rows_per_s)} rows/s | >= 100,000 rows/s | ${yes(br.fill_rows_per_s >= 100_000)} |`,
          `| drained by two workers, sandbox (from the 202) | ${fmt(br.drain_per_s)} msg/s | >= 10,000 msg/s | ${yes(br.drain_per_s >= 10_000)} |`,
          `| sent twice / credits exact | ${br.sent_twice} / ${br.credits_exact} | 0 / true | ${yes(br.sent_twice === 0 && br.credits_exact)} |`,
        ]
      : []),
    ...(r.record ? recordRows(r.record as RecordFigures, yes) : []),
  ].join('\n');
}

main().catch(async (error: unknown) => {
  console.error(error);
  for (const child of children) child.kill('SIGKILL');
  process.exit(1);
});
