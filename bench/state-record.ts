/**
 * bench:state's fifth step (STATE_STEPS=record), issue 57: the voter record's tables at a state's scale, on the
 * state roll the bench imported. The rows are written in SQL as the service keeps them (as bench:surveys and
 * bench:field write theirs), then asked through the API:
 *   - every voter carries one of 20 tags ("group 0" to "group 19"), a seventh also "farmer", and a choice field
 *     "caste": STATE_QUERIES distinct lists filtered by a tag or the field, alone or with a constituency or a
 *     booth, each asked once (goal: p99 at most 50 ms);
 *   - STATE_RESPONSES (1,000,000) completed survey responses of two answers each: the results grouped by booth,
 *     asked five times (goal: at most 1 s);
 *   - STATE_VISITS (1,000,000) visits and STATE_MARKS (5,000,000) poll-day marks (each voter's latest in
 *     `poll_voted`): turnout by booth, asked five times (goal: at most 200 ms).
 * Beside each, the reference: the roll's own count of voters by booth (`SELECT booth_key, count(*) ... GROUP BY
 * booth_key`), in the same run.
 */
import type pg from 'pg';
import { benchPoll as poll, constituencyName } from './generate.ts';
import { type Latencies, timed, timeEach } from './reads.ts';
import { api } from './server.ts';

const RESPONSES = Number(process.env.STATE_RESPONSES ?? 1_000_000);
const VISITS = Number(process.env.STATE_VISITS ?? 1_000_000);
const MARKS = Number(process.env.STATE_MARKS ?? 5_000_000);
const TAGS = 20;
const castes = ['General', 'OBC', 'SC', 'ST'];

export interface RecordFigures {
  load_seconds: number;
  tagged_rows: number;
  field_values: number;
  lists: Latencies;
  responses: number;
  results_by_booth_ms: Timed;
  visits: number;
  marks: number;
  turnout_by_booth_ms: Timed;
  reference_count_by_booth_ms: Timed;
}

interface Timed {
  median: number;
  max: number;
}

/** `count` distinct list filters by a tag or the caste field, alone or with a constituency or a booth. */
function recordFilters(count: number, constituencies: number): string[] {
  const out = new Set<string>();
  let seed = 57;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  const tag = () => encodeURIComponent(`group ${Math.floor(random() * TAGS)}`);
  const caste = () => castes[Math.floor(random() * castes.length)]!;
  const c = () => encodeURIComponent(constituencyName(Math.floor(random() * constituencies)));
  const booth = () => 1 + Math.floor(random() * 300);
  const kinds = [
    () => `tags=${tag()}`,
    () => `tags=farmer`,
    () => `fields.caste=${caste()}`,
    () => `tags=${tag()}&constituency=${c()}`,
    () => `fields.caste=${caste()}&constituency=${c()}`,
    () => `tags=${tag()}&booth=${booth()}`,
    () => `fields.caste=${caste()}&booth=${booth()}`,
    () => `tags=${tag()}&fields.caste=${caste()}&constituency=${c()}`,
  ];
  for (let i = 0; out.size < count && i < count * 100; i++) out.add(kinds[i % kinds.length]!());
  return [...out].map((q) => `/voters?${q}`);
}

/** Writes the record's rows for the state workspace `ws`, as the service keeps them; returns the survey's id. */
async function load(base: string, token: string, ws: number, db: pg.Pool): Promise<string> {
  // A database kept by an earlier run (STATE_KEEP=1, then STATE_DATABASE) holds the rows already.
  const earlier = await db.query<{ id: string }>(
    `SELECT s.id FROM surveys s WHERE s.workspace_id = $1 AND s.name = $2
       AND EXISTS (SELECT 1 FROM poll_voted p WHERE p.workspace_id = $1) ORDER BY s.id DESC LIMIT 1`,
    [ws, poll.name],
  );
  if (earlier.rows[0]) {
    console.log('   the rows of an earlier run, kept');
    return `svy_${earlier.rows[0].id}`;
  }
  // Rows a failed run left (STATE_KEEP=1) go first.
  for (const table of [
    'poll_voted',
    'poll_marks',
    'visits',
    'survey_responses',
    'voter_field_values',
    'voter_tags',
  ])
    await db.query(`DELETE FROM ${table} WHERE workspace_id = $1`, [ws]);
  const fields = await db.query('SELECT 1 FROM voter_fields WHERE workspace_id = $1 AND key = $2', [
    ws,
    'caste',
  ]);
  if (!fields.rowCount)
    await api(`${base}/api`, 'POST', '/voter-fields', token, {
      key: 'caste',
      label: 'Caste',
      type: 'choice',
      choices: castes,
    });
  const survey = await api(`${base}/api`, 'POST', '/surveys', token, poll);
  const sid = Number(String(survey.id).replace(/^[a-z]+_/, ''));
  const step = (what: string) => console.log(`   ${new Date().toISOString().slice(11, 19)} ${what}`);
  step('tags');
  await db.query(
    `INSERT INTO voter_tag_names (workspace_id, key, label)
     SELECT $1::bigint, 'group ' || g, 'group ' || g FROM generate_series(0, ${TAGS - 1}) g
     UNION ALL SELECT $1::bigint, 'farmer', 'farmer' ON CONFLICT DO NOTHING`,
    [ws],
  );
  await db.query(
    `INSERT INTO voter_tags (workspace_id, tag_key, voter_id)
     SELECT $1::bigint, 'group ' || (id % ${TAGS}), id FROM voters WHERE workspace_id = $1
     UNION ALL SELECT $1::bigint, 'farmer', id FROM voters WHERE workspace_id = $1 AND id % 7 = 0`,
    [ws],
  );
  step('field values');
  await db.query(
    `INSERT INTO voter_field_values (voter_id, workspace_id, field_key, value_text)
     SELECT id, $1::bigint, 'caste', (ARRAY[${castes.map((c) => `'${c}'`).join(', ')}])[1 + id % 4]
     FROM voters WHERE workspace_id = $1`,
    [ws],
  );
  step(`${RESPONSES.toLocaleString('en-US')} survey responses`);
  await db.query(
    `INSERT INTO survey_responses (workspace_id, survey_id, voter_id, address, channel, language, status, question,
       answered, started_at, updated_at, completed_at)
     SELECT workspace_id, $2::bigint, id, phone, 'sms', 'en', 'completed', 2, 2, now(), now(), now()
     FROM voters WHERE workspace_id = $1 ORDER BY id LIMIT $3`,
    [ws, sid, RESPONSES],
  );
  // As the service writes them: the voter's booth with each answer.
  await db.query(
    `INSERT INTO survey_answers (response_id, question_key, workspace_id, survey_id, voter_id, choice_key, booth,
       answered_at)
     SELECT r.id, 'vote', r.workspace_id, r.survey_id, r.voter_id, (1 + r.voter_id % 3)::text, v.booth, now()
     FROM survey_responses r JOIN voters v ON v.id = r.voter_id WHERE r.survey_id = $1`,
    [sid],
  );
  await db.query(
    `INSERT INTO survey_answers (response_id, question_key, workspace_id, survey_id, voter_id, number_value, booth,
       answered_at)
     SELECT r.id, 'household', r.workspace_id, r.survey_id, r.voter_id, 1 + r.voter_id % 9, v.booth, now()
     FROM survey_responses r JOIN voters v ON v.id = r.voter_id WHERE r.survey_id = $1`,
    [sid],
  );
  step(`${VISITS.toLocaleString('en-US')} visits`);
  await db.query(
    `INSERT INTO visits (workspace_id, client_id, voter_id, outcome, visited_at, created_at)
     SELECT $1::bigint, 'state-' || id, id, CASE WHEN id % 4 = 0 THEN 'not_home' ELSE 'met' END, now(), now()
     FROM voters WHERE workspace_id = $1 ORDER BY id LIMIT $2`,
    [ws, VISITS],
  );
  step(`${MARKS.toLocaleString('en-US')} poll-day marks`);
  await db.query(
    `INSERT INTO poll_marks (workspace_id, client_id, voter_id, voted, marked_at, created_at)
     SELECT $1::bigint, 'state-' || id, id, 1, now(), now() FROM voters WHERE workspace_id = $1 ORDER BY id LIMIT $2`,
    [ws, MARKS],
  );
  await db.query(
    `INSERT INTO poll_voted (voter_id, workspace_id, voted, marked_at, booth_key, part_number, supporter)
     SELECT v.id, v.workspace_id, 1, m.marked_at, v.booth_key, v.part_number,
       CASE WHEN v.support_level IN (1, 2) THEN 1 ELSE 0 END
     FROM poll_marks m JOIN voters v ON v.id = m.voter_id WHERE m.workspace_id = $1`,
    [ws],
  );
  step('VACUUM ANALYZE (as autovacuum leaves loaded tables)');
  for (const table of [
    'voter_tags',
    'voter_field_values',
    'voter_value_counts',
    'survey_responses',
    'survey_answers',
    'visits',
    'poll_marks',
    'poll_voted',
  ])
    await db.query(`VACUUM ANALYZE ${table}`);
  return String(survey.id);
}

export async function recordTables(
  base: string,
  token: string,
  ws: number,
  db: pg.Pool,
  shape: { voters: number; queries: number; constituencies: number },
): Promise<RecordFigures> {
  console.log('5. the voter record at scale: tags, a field, survey responses, visits and poll-day marks ...');
  const started = performance.now();
  const surveyId = await load(base, token, ws, db);
  const loadSeconds = +((performance.now() - started) / 1000).toFixed(1);
  const count = async (table: string) =>
    Number((await db.query(`SELECT count(*) AS n FROM ${table} WHERE workspace_id = $1`, [ws])).rows[0].n);
  const lists = await timeEach(`${base}/api`, recordFilters(shape.queries, shape.constituencies), token);
  console.log(`   lists by a tag or the field ${JSON.stringify(lists)}`);
  const results = `/surveys/${surveyId}/results?group_by=booth`;
  const check = await api(`${base}/api`, 'GET', results, token);
  const responses = Math.min(RESPONSES, shape.voters);
  if (check.responses !== responses) throw new Error(`results count ${String(check.responses)} responses`);
  const resultsMs = await timed(() => api(`${base}/api`, 'GET', results, token), 5, true);
  console.log(`   survey results by booth ${JSON.stringify(resultsMs)}`);
  const turnoutMs = await timed(
    () => api(`${base}/api`, 'GET', '/poll-day/turnout?group_by=booth', token),
    5,
    true,
  );
  console.log(`   turnout by booth ${JSON.stringify(turnoutMs)}`);
  const reference = await timed(
    () => db.query('SELECT booth_key, count(*) FROM voters WHERE workspace_id = $1 GROUP BY booth_key', [ws]),
    5,
    true,
  );
  return {
    load_seconds: loadSeconds,
    tagged_rows: await count('voter_tags'),
    field_values: await count('voter_field_values'),
    lists,
    responses,
    results_by_booth_ms: resultsMs,
    visits: await count('visits'),
    marks: await count('poll_marks'),
    turnout_by_booth_ms: turnoutMs,
    reference_count_by_booth_ms: reference,
  };
}

/** The step's rows of bench:state's table. */
export function recordRows(r: RecordFigures, yes: (ok: boolean) => string): string[] {
  const fmt = (n: number) => n.toLocaleString('en-US');
  const ref = `the roll's count by booth ${r.reference_count_by_booth_ms.median} ms`;
  return [
    `| ${r.lists.n} lists filtered by a tag or a field (${fmt(r.tagged_rows)} tags, ${fmt(r.field_values)} values), each once | p50 ${r.lists.p50.toFixed(1)} ms, p99 ${r.lists.p99.toFixed(1)} ms, max ${r.lists.max.toFixed(0)} ms | p99 <= 50 ms | ${yes(r.lists.p99 <= 50)} |`,
    `| survey results by booth, ${fmt(r.responses)} responses | median ${r.results_by_booth_ms.median} ms, max ${r.results_by_booth_ms.max} ms | <= 1,000 ms (${ref}) | ${yes(r.results_by_booth_ms.max <= 1000)} |`,
    `| turnout by booth, ${fmt(r.visits)} visits, ${fmt(r.marks)} marks | median ${r.turnout_by_booth_ms.median} ms, max ${r.turnout_by_booth_ms.max} ms | <= 200 ms (${ref}) | ${yes(r.turnout_by_booth_ms.max <= 200)} |`,
  ];
}
