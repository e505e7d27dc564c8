/**
 * npm run bench:surveys [-- --responses 1000000 --recipients 100000 --rate 200 --seconds 20]
 *
 * Surveys at scale (issue 39), in this process, on SQLite (a new file), or on PostgreSQL with
 * DATABASE_URL=postgres://... (a new database is made beside it and dropped after):
 *   - results: a survey's results over `--responses` completed responses of as many voters (two answers each),
 *     without grouping and grouped by booth (1,000 booths), each asked 5 times; beside them the reference, the
 *     roll's own count of voters by booth (SELECT booth, count(*) ... GROUP BY booth): the ratio is the figure.
 *     The goal: at most 1 s for 1,000,000 responses grouped by booth.
 *   - answers (SQLite only, skipped with --recipients 0): a three-question SMS survey run to `--recipients`
 *     voters, the service's own loops running (the survey loop and the delivery worker, as `npm start` runs
 *     them); once the first questions are out, `--rate` answers a second for `--seconds` seconds through
 *     POST /api/inbound; for each answer, the time from the answer to its next question's hand-over to the
 *     (sandbox) provider. The goal: p99 within 2 s at 200 answers a second.
 * The figures go to bench/results/<date>-surveys-<dialect>.json and are printed.
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import pino from 'pino';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { connect } from '../src/db/connect.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { Background } from '../src/jobs/background.ts';
import { createProviders } from '../src/providers/registry.ts';
import { benchPoll as poll } from './generate.ts';
import { percentile, timed } from './reads.ts';
import { keepResults, scratchDatabase } from './server.ts';

const { values: args } = parseArgs({
  options: {
    responses: { type: 'string', default: '1000000' },
    recipients: { type: 'string', default: '100000' },
    rate: { type: 'string', default: '200' },
    seconds: { type: 'string', default: '20' },
  },
});
const RESPONSES = Number(args.responses);
const pgBase = process.env.DATABASE_URL?.startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const dialect = pgBase ? 'postgres' : 'sqlite';
const RECIPIENTS = dialect === 'sqlite' ? Number(args.recipients) : 0;
const RATE = Number(args.rate);
const SECONDS = Number(args.seconds);
const log = pino({ level: 'silent' });
const step = (what: string) => console.error(`${new Date().toISOString().slice(11, 19)} ${what}`);

const database = () => scratchDatabase('ces-surveys-', pgBase);

async function start(url: string, env: Record<string, string> = {}) {
  const config = loadConfig({
    DATABASE_URL: url,
    LOG_LEVEL: 'silent',
    QUIET_HOURS: '',
    RATE_LIMIT_AUTHENTICATED_PER_MIN: '10000000',
    RATE_LIMIT_PUBLIC_PER_MIN: '10000000',
    SANDBOX_DELIVERY_DELAY_MS: '0',
    // Loading a million rows in one statement takes longer than a request's limit.
    DB_STATEMENT_TIMEOUT_MS: '600000',
    ...env,
  });
  const db = connect(config.databaseUrl, config.database);
  await migrateToLatest(db);
  const providers = createProviders(config, log);
  const app = await buildApp({ config, db, providers });
  return { app, db, config, providers };
}

type Started = Awaited<ReturnType<typeof start>>;

async function call(s: Started, method: string, url: string, token: string | undefined, body?: unknown) {
  const res = await s.app.inject({
    method: method as 'GET',
    url,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body ? { 'content-type': 'application/json' } : {}),
    },
    ...(body ? { payload: JSON.stringify(body) } : {}),
  });
  if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body.slice(0, 300)}`);
  return JSON.parse(res.body) as { data: Record<string, unknown> & { id: string } };
}

async function owner(s: Started) {
  const res = await call(s, 'POST', '/api/auth/register', undefined, {
    name: 'Bench Office',
    email: `bench-${randomUUID().slice(0, 8)}@example.org`,
    password: 'correct horse battery staple 7',
    phone: `+9198${String(Math.floor(Math.random() * 1e8)).padStart(8, '0')}`,
  });
  const data = res.data as unknown as { access_token: string; user: { workspace_id: number } };
  return { token: data.access_token, ws: data.user.workspace_id };
}

/** `count` voters of a workspace, 1,000 booths, phones +9190<8 digits>: one INSERT ... SELECT in the database. */
async function insertVoters(s: Started, ws: number, count: number, phonePrefix: string) {
  const now = new Date().toISOString();
  const k = s.db.kysely;
  if (s.db.dialect === 'postgres')
    await sql`INSERT INTO voters (workspace_id, name, name_key, phone, booth, booth_key, created_at, updated_at)
      SELECT ${ws}, 'Voter ' || i, 'voter ' || i, ${phonePrefix} || lpad(i::text, 8, '0'), 'Booth ' || (i % 1000), 'booth ' || (i % 1000), ${now}::timestamptz, ${now}::timestamptz
      FROM generate_series(1, ${count}) AS i`.execute(k);
  else
    await sql`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count})
      INSERT INTO voters (workspace_id, name, name_key, phone, booth, booth_key, created_at, updated_at)
      SELECT ${ws}, 'Voter ' || i, 'voter ' || i, ${phonePrefix} || substr('00000000' || i, -8), 'Booth ' || (i % 1000), 'booth ' || (i % 1000), ${now}, ${now}
      FROM n`.execute(k);
}

async function results(): Promise<Record<string, unknown>> {
  const store = await database();
  const s = await start(store.url);
  try {
    const o = await owner(s);
    const t0 = performance.now();
    step(`results: ${RESPONSES} voters`);
    await insertVoters(s, o.ws, RESPONSES, '+9190');
    step('results: responses and answers');
    const survey = await call(s, 'POST', '/api/surveys', o.token, poll);
    const sid = Number(survey.data.id.slice(4));
    const now = new Date().toISOString();
    const k = s.db.kysely;
    const ts = s.db.dialect === 'postgres' ? sql`${now}::timestamptz` : sql`${now}`;
    await sql`INSERT INTO survey_responses (workspace_id, survey_id, voter_id, address, channel, language, status, question, answered, started_at, updated_at, completed_at)
      SELECT workspace_id, ${sid}, id, phone, 'sms', 'en', 'completed', 2, 2, ${ts}, ${ts}, ${ts} FROM voters WHERE workspace_id = ${o.ws}`.execute(
      k,
    );
    // As the service writes them: the voter's places with each answer.
    await sql`INSERT INTO survey_answers (response_id, question_key, workspace_id, survey_id, voter_id, choice_key, booth, answered_at)
      SELECT r.id, 'vote', r.workspace_id, r.survey_id, r.voter_id, CAST(1 + (r.voter_id % 3) AS text), v.booth, ${ts}
      FROM survey_responses r JOIN voters v ON v.id = r.voter_id WHERE r.survey_id = ${sid}`.execute(k);
    await sql`INSERT INTO survey_answers (response_id, question_key, workspace_id, survey_id, voter_id, number_value, booth, answered_at)
      SELECT r.id, 'household', r.workspace_id, r.survey_id, r.voter_id, 1 + (r.voter_id % 9), v.booth, ${ts}
      FROM survey_responses r JOIN voters v ON v.id = r.voter_id WHERE r.survey_id = ${sid}`.execute(k);
    if (s.db.dialect === 'postgres') await sql`ANALYZE`.execute(k);
    else await sql`ANALYZE`.execute(k);
    step('results: asking');
    const loadSeconds = Math.round((performance.now() - t0) / 100) / 10;
    const path = `/api/surveys/${survey.data.id}/results`;
    const check = await call(s, 'GET', `${path}?group_by=booth`, o.token);
    const q = check.data as unknown as { responses: number; questions: Array<{ groups: unknown[] }> };
    if (q.responses !== RESPONSES || q.questions[0]!.groups.length !== 1000)
      throw new Error('results do not add up');
    const reference = await timed(() =>
      sql`SELECT booth, count(*) FROM voters WHERE workspace_id = ${o.ws} GROUP BY booth`.execute(k),
    );
    const plain = await timed(() => call(s, 'GET', path, o.token));
    const byBooth = await timed(() => call(s, 'GET', `${path}?group_by=booth`, o.token));
    return {
      responses: RESPONSES,
      load_seconds: loadSeconds,
      reference_ms: reference,
      results_ms: plain,
      results_by_booth_ms: byBooth,
      ratio_by_booth: Math.round((byBooth.median / Math.max(reference.median, 1)) * 10) / 10,
      goal_by_booth_ms: 1000,
    };
  } finally {
    await s.app.close();
    await s.db.close().catch(() => {});
    await store.drop();
  }
}

async function answers(): Promise<Record<string, unknown>> {
  const store = await database();
  const s = await start(store.url);
  const background = new Background({
    db: s.db,
    config: s.config,
    providers: s.providers,
    log: log as never,
  });
  try {
    const o = await owner(s);
    await s.db.kysely
      .updateTable('credit_balances')
      .set({ balance: RECIPIENTS * 10 })
      .where('workspace_id', '=', o.ws)
      .execute();
    await insertVoters(s, o.ws, RECIPIENTS, '+9191');
    const survey = await call(s, 'POST', '/api/surveys', o.token, poll);
    step(`answers: ${RECIPIENTS} voters in; the run starts`);
    background.start();
    const t0 = performance.now();
    const run = await call(s, 'POST', `/api/surveys/${survey.data.id}/runs`, o.token, {
      channel: 'sms',
      filters: {},
    });
    const runId = run.data.id;
    const sentFirst = async () =>
      Number(
        (
          await sql<{
            n: number;
          }>`SELECT count(*) AS n FROM messages WHERE workspace_id = ${o.ws} AND survey_response_id IS NOT NULL AND status IN ('sent', 'delivered', 'failed')`.execute(
            s.db.kysely,
          )
        ).rows[0]!.n,
      );
    while ((await sentFirst()) < RECIPIENTS) await new Promise((r) => setTimeout(r, 500));
    step('answers: every first question sent');
    const fillSeconds = Math.round((performance.now() - t0) / 100) / 10;
    // Answers at RATE a second, each to a different voter, first question: "1".
    const total = RATE * SECONDS;
    const answeredAt = new Map<string, number>();
    const began = Date.now();
    const pending: Promise<unknown>[] = [];
    for (let i = 0; i < total; i++) {
      const due = began + (i * 1000) / RATE;
      const wait = due - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const from = `+9191${String(i + 1).padStart(8, '0')}`;
      answeredAt.set(from, Date.now());
      pending.push(call(s, 'POST', '/api/inbound', o.token, { channel: 'sms', from, body: '1' }));
    }
    await Promise.all(pending);
    const lateness = Date.now() - began - SECONDS * 1000;
    // Every second question handed over.
    const secondSent = async () =>
      (
        await sql<{
          to: string;
          sent_at: string;
        }>`SELECT "to", sent_at FROM messages WHERE workspace_id = ${o.ws} AND survey_response_id IS NOT NULL AND body LIKE 'Voters in your house%' AND status IN ('sent', 'delivered')`.execute(
          s.db.kysely,
        )
      ).rows;
    let rows = await secondSent();
    for (let i = 0; i < 120 && rows.length < total; i++) {
      await new Promise((r) => setTimeout(r, 500));
      rows = await secondSent();
    }
    const delays = rows
      .map((r) => Date.parse(r.sent_at) - (answeredAt.get(r.to) ?? NaN))
      .filter((d) => Number.isFinite(d))
      .sort((a, b) => a - b);
    const progress = await call(s, 'GET', `/api/survey-runs/${runId}`, o.token);
    return {
      recipients: RECIPIENTS,
      fill_and_first_questions_seconds: fillSeconds,
      answers: total,
      rate_per_second: RATE,
      answers_sent_late_ms: Math.max(0, lateness),
      next_question_handed_over: delays.length,
      next_question_ms: {
        p50: percentile(delays, 50),
        p99: percentile(delays, 99),
        max: delays.at(-1) ?? null,
      },
      goal_p99_ms: 2000,
      run: progress.data,
    };
  } finally {
    await background.stop();
    await s.app.close();
    await s.db.close().catch(() => {});
    await store.drop();
  }
}

const figures: Record<string, unknown> = { dialect };
if (RESPONSES > 0) figures.results = await results();
if (RECIPIENTS > 0) figures.answers = await answers();
const file = keepResults(`-surveys-${dialect}`, figures);
console.log(JSON.stringify(figures, null, 2));
console.log(`written to ${file}`);
