import { StringDecoder } from 'node:string_decoder';
import type SQLite from 'better-sqlite3';
import { type Compilable, type Kysely, sql } from 'kysely';
import { escapeLiteral } from 'pg';
import { type CopyToStreamQuery, to as copyTo } from 'pg-copy-streams';
import type { BulkConnections, Db } from '../../db/connect.ts';
import type { Database } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { filteredVoters, type VoterFilters } from '../voters/voters.search.ts';
import { integerRecordColumns, recordFields } from '../voters/voter-record.rules.ts';
import { type SideColumns, sideReader } from './export-side.ts';

// The export's reads: keyset batches, COPY on PostgreSQL, and the id ranges the export threads split.

/** The columns every export has, in order (the first ten, as before the voter record). */
export const exportColumns = [
  'id',
  'name',
  'phone',
  'email',
  'constituency',
  'booth',
  'ward',
  'address',
  'created_at',
  'updated_at',
] as const;

/** The voter record's fields that follow them, and the tags (support_level only in a sensitive export). */
const recordExportColumns = [...recordFields, 'tags'] as const;
const numericColumns = new Set<string>(['id', 'age', ...integerRecordColumns]);

/** One row of an export, as its columns (ExportShape.columns) say. */
export type ExportRow = Array<string | number | null>;

/**
 * What an export writes: the ten columns, the voter record's, then each custom field as `field:<key>`.
 * Sensitive data (support_level, sensitive fields) only when the export asked for it.
 */
export interface ExportShape {
  columns: string[];
  /** The custom fields written, by key. */
  fieldKeys: string[];
  sensitive: boolean;
  /** YYYY-MM-DD: the day ages are computed for. */
  today: string;
}

export async function exportShape(
  db: Executor,
  workspaceId: number,
  includeSensitive: boolean,
  now = new Date(),
): Promise<ExportShape> {
  const defs = await db
    .selectFrom('voter_fields')
    .select(['key', 'sensitive'])
    .where('workspace_id', '=', workspaceId)
    .orderBy('key')
    .execute();
  const fieldKeys = defs.filter((d) => includeSensitive || !d.sensitive).map((d) => d.key);
  return {
    columns: [
      ...exportColumns,
      ...recordExportColumns.filter((c) => includeSensitive || c !== 'support_level'),
      ...fieldKeys.map((k) => `field:${k}`),
    ],
    fieldKeys,
    sensitive: includeSensitive,
    today: now.toISOString().slice(0, 10),
  };
}

/** SQLite: the columns of `shape` that export-side.ts fills (the tags and the custom fields). */
export function sideColumns(workspaceId: number, shape: ExportShape): SideColumns {
  return {
    workspaceId,
    tags: shape.columns.indexOf('tags'),
    fields: shape.fieldKeys.map((k) => [k, shape.columns.indexOf(`field:${k}`)]),
  };
}

/** Whether column `i` of the shape holds integers (PostgreSQL's COPY text gives every value as text). */
export function numericAt(shape: ExportShape): boolean[] {
  return shape.columns.map((c) => numericColumns.has(c));
}

// On PostgreSQL the timestamps are formatted by the server (as toISOString would): parsing two timestamptz
// per row into Dates in JS costs more than the rest of the row.
const isoUtc = (column: 'created_at' | 'updated_at') =>
  sql<string>`to_char(${sql.ref(`voters.${column}`)} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`.as(
    column,
  );

/** The SQL of the record's computed columns: age today, the tags (`;` between them) and a custom field. */
function recordExpressions(dialect: Db['dialect'], shape: ExportShape) {
  const pg = dialect === 'postgres';
  const today = shape.today; // YYYY-MM-DD, ours: safe as a literal
  const year = Number(today.slice(0, 4));
  const md = today.slice(5);
  const age = pg
    ? `CASE WHEN voters.birth_date IS NOT NULL THEN ${year} - substr(voters.birth_date, 1, 4)::int - (substr(voters.birth_date, 6) > '${md}')::int
         WHEN voters.birth_key IS NOT NULL THEN ${year} - substr(voters.birth_key, 1, 4)::int END`
    : `CASE WHEN voters.birth_date IS NOT NULL THEN ${year} - CAST(substr(voters.birth_date, 1, 4) AS INTEGER) - (substr(voters.birth_date, 6) > '${md}')
         WHEN voters.birth_key IS NOT NULL THEN ${year} - CAST(substr(voters.birth_key, 1, 4) AS INTEGER) END`;
  const tagRows = `FROM voter_tags t JOIN voter_tag_names n ON n.workspace_id = t.workspace_id AND n.key = t.tag_key
       WHERE t.voter_id = voters.id`;
  const tags = pg
    ? `(SELECT string_agg(n.label, ';' ORDER BY lower(n.label), n.label) ${tagRows})`
    : `(SELECT group_concat(label, ';') FROM (SELECT n.label AS label ${tagRows} ORDER BY lower(n.label), n.label))`;
  const field = (key: string) =>
    pg
      ? `(SELECT coalesce(f.value_text, f.value_number::text) FROM voter_field_values f WHERE f.voter_id = voters.id AND f.field_key = '${key}')`
      : `(SELECT coalesce(f.value_text, CASE WHEN f.value_number = CAST(f.value_number AS INTEGER) THEN CAST(f.value_number AS INTEGER) ELSE f.value_number END) FROM voter_field_values f WHERE f.voter_id = voters.id AND f.field_key = '${key}')`;
  return { age, tags, field };
}

/**
 * The SELECT list of an export in `shape`'s column order. `guard`: text columns through the formula guard in
 * SQL (PostgreSQL's CSV, which the database writes itself).
 */
function exportSelection(dialect: Db['dialect'], shape: ExportShape, guard = false) {
  const text = (expression: string, as: string) =>
    sql.raw<string>(guard ? sqlFormulaGuard(expression) : expression).as(as);
  const plain = (c: string) =>
    c === 'id' || c === 'phone' || numericColumns.has(c) || !guard
      ? sql.ref<string>(`voters.${c}`).as(c)
      : text(`voters.${c}`, c);
  const { age } = recordExpressions(dialect, shape);
  // SQLite's tags and field values are filled per batch (export-side.ts): NULL here keeps their columns.
  // PostgreSQL's come from the row's `side` (withSide): computed once, however often the guard names them.
  const side = (as: string) =>
    dialect === 'sqlite' ? sql.raw<string>('NULL').as(as) : text(`side."${as}"`, as);
  const stamps =
    dialect === 'postgres'
      ? [isoUtc('created_at'), isoUtc('updated_at')]
      : [
          sql.ref<string>('voters.created_at').as('created_at'),
          sql.ref<string>('voters.updated_at').as('updated_at'),
        ];
  return [
    ...exportColumns.slice(0, 8).map(plain),
    ...stamps,
    ...recordExportColumns
      .filter((c) => shape.sensitive || c !== 'support_level')
      .map((c) => (c === 'age' ? sql.raw<number>(age).as('age') : c === 'tags' ? side('tags') : plain(c))),
    ...shape.fieldKeys.map((k) => side(`field:${k}`)),
  ];
}

/**
 * SQLite: the voters matching `filters`, in id order, as batches of rows (keyset pagination on id). Each
 * batch is one short query, so no cursor or iterator stays open between batches: the single connection stays
 * free for other requests while the consumer is slow. Rows come from a prepared statement in raw mode (arrays,
 * no per-row objects) under Kysely's connection lock. PostgreSQL reads an export through COPY instead
 * (copyVotersCsv, copyVoterRows).
 */
export async function* exportVoterBatches(
  db: Db,
  workspaceId: number,
  filters: VoterFilters,
  shape: ExportShape,
  batchSize = 2000,
): AsyncGenerator<ExportRow[]> {
  if (db.raw.dialect !== 'sqlite') throw new Error('a PostgreSQL export reads through COPY');
  const { sqlite } = db.raw;
  // The text is the same for every batch (only `after`, the parameter after the filters', moves): built
  // and prepared once.
  const { sql: text, parameters } = filteredVoters(db.kysely, workspaceId, filters)
    .select(exportSelection(db.dialect, shape))
    .where('voters.id', '>', -1)
    .orderBy('voters.id')
    .limit(batchSize)
    .compile();
  const values = [...parameters];
  const afterAt = values.length - 2;
  if (values[afterAt] !== -1 || values[afterAt + 1] !== batchSize)
    throw new Error('unexpected parameter order');
  let statement: SQLite.Statement | undefined;
  let fill: ReturnType<typeof sideReader> | undefined;
  for (let after = 0; ;) {
    values[afterAt] = after;
    const rows = await db.kysely.connection().execute(async () => {
      statement ??= sqlite.prepare(text).raw(true);
      fill ??= sideReader(sqlite, sideColumns(workspaceId, shape));
      const batch = statement.all(...values) as ExportRow[];
      if (batch.length > 0) fill(batch, after, batch[batch.length - 1]![0] as number);
      return batch;
    });
    if (rows.length === 0) return;
    const full = rows.length === batchSize;
    after = rows[rows.length - 1]![0] as number;
    // Nothing here refers to the batch while the consumer has it: a paused export holds it only as long
    // as its consumer does.
    yield rows;
    if (!full) return;
  }
}

/**
 * A formula guard in SQL with exactly the rules of `guardFormula` (src/lib/csv.ts): a value whose first
 * character after any leading apostrophes is = + - @ tab or CR, and which is not a plain number, gets one
 * more leading apostrophe. The cheap first-character test comes first, so almost every value skips the
 * regular expressions.
 */
function sqlFormulaGuard(column: string): string {
  return `CASE WHEN ascii(${column}) IN (61, 43, 45, 64, 9, 13, 39) THEN
      CASE WHEN ${column} ~ '^''*[-=+@\\t\\r]'
            AND ltrim(${column}, '''') !~ '^[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?$'
        THEN '''' || ${column} ELSE ${column} END
    ELSE ${column} END`;
}

/** A bind parameter of a compiled query as an SQL literal, for the one statement that takes none (COPY). */
function literal(value: unknown): string {
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value);
  if (typeof value === 'string') return escapeLiteral(value);
  throw new Error(`cannot inline a ${typeof value} into COPY`);
}

/**
 * PostgreSQL: the export's query with each voter's tags and custom field values computed once, in a LATERAL
 * subquery (`side`) the SELECT list names. As scalar subqueries in the list, each was evaluated again by every
 * mention in the formula guard around it (twice a row at least): the CSV export of 10,000,000 voters fell from
 * 749,443 rows/s to 140,586 with the voter record's tags. `OFFSET 0` keeps PostgreSQL from pulling the
 * subquery up into the SELECT list, which puts the repeats back (a million tagged voters: 16.4 s, 10.6 s with it).
 */
function withSide(db: Kysely<Database>, workspaceId: number, filters: VoterFilters, shape: ExportShape) {
  const { tags, field } = recordExpressions('postgres', shape);
  const fields = shape.fieldKeys.map((k) => `, ${field(k)} AS "field:${k}"`).join('');
  return filteredVoters(db, workspaceId, filters).leftJoinLateral(
    sql.raw<{ tags: string | null }>(`(SELECT ${tags} AS tags${fields} OFFSET 0)`).as('side'),
    (join) => join.onTrue(),
  );
}

/**
 * PostgreSQL: the CSV export as the database writes it, `COPY (SELECT ...) TO STDOUT (FORMAT csv, HEADER)`,
 * with the formula guard and the timestamps' format in the query, so no row passes through JS (see copyOut).
 */
export async function* copyVotersCsv(
  db: Kysely<Database>,
  pool: BulkConnections,
  workspaceId: number,
  filters: VoterFilters,
  shape: ExportShape,
): AsyncGenerator<Buffer> {
  // A phone is always E.164 (+ and digits): a plain number, never guarded, and testing a million of them
  // (every one starts with +) would cost more than the rest of the guard. The header is COPY's own (the
  // columns' names): the first bytes come from the database, so a pool that cannot give a connection is a
  // 503 before the answer starts.
  const query = withSide(db, workspaceId, filters, shape)
    .select(exportSelection('postgres', shape, true))
    .orderBy('voters.id');
  yield* copyOut(pool, workspaceId, query, '(FORMAT csv, HEADER)');
}

/**
 * `COPY (query) TO STDOUT options` as the server sends it. COPY takes no bind parameters: the filter values
 * are inlined as escaped literals. One pooled connection is held until the consumer has taken the last byte
 * (backpressure reaches the server); a consumer that stops early (a client that went away) closes that
 * connection, which ends the COPY on the server.
 */
async function* copyOut(
  connectFor: BulkConnections,
  workspaceId: number,
  query: Compilable,
  options: string,
): AsyncGenerator<Buffer> {
  const compiled = query.compile();
  const select = compiled.sql.replace(/\$(\d+)/g, (_, n: string) =>
    literal(compiled.parameters[Number(n) - 1]),
  );
  const client = await connectFor(workspaceId);
  let stream: CopyToStreamQuery | undefined;
  let finished = false;
  try {
    stream = client.query(copyTo(`COPY (${select}) TO STDOUT ${options}`));
    for await (const chunk of stream) yield chunk as Buffer;
    finished = true;
  } finally {
    if (finished) {
      client.release();
    } else {
      stream?.destroy();
      client.release(new Error('the export stopped before its end'));
    }
  }
}

// COPY's text format: one line per row, fields split by tabs, NULL as \N, and a backslash before b f n r t v
// and itself for the characters those stand for.
const COPY_ESCAPE = /\\(.)/g;
const copyUnescapes: Record<string, string> = { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v' };
function copyField(field: string): string | null {
  if (field === '\\N') return null;
  return field.includes('\\') ? field.replace(COPY_ESCAPE, (_, c: string) => copyUnescapes[c] ?? c) : field;
}

/**
 * PostgreSQL: the export's rows for the Excel sheet from one `COPY (SELECT ...) TO STDOUT` in text format,
 * a batch per piece the server sends (a few hundred rows). Reading rows this way instead of in keyset
 * batches through the driver skips node-postgres' per-row work (and its garbage), which bounded the Excel
 * export on PostgreSQL. The connection is held and released as copyOut says.
 */
export async function* copyVoterRows(
  db: Kysely<Database>,
  pool: BulkConnections,
  workspaceId: number,
  filters: VoterFilters,
  shape: ExportShape,
): AsyncGenerator<ExportRow[]> {
  const query = withSide(db, workspaceId, filters, shape)
    .select(exportSelection('postgres', shape))
    .orderBy('voters.id');
  const numeric = numericAt(shape);
  const decoder = new StringDecoder('utf8');
  let rest = '';
  for await (const chunk of copyOut(pool, workspaceId, query, '')) {
    const text = rest + decoder.write(chunk);
    const end = text.lastIndexOf('\n');
    rest = text.slice(end + 1);
    if (end < 0) continue;
    const rows: ExportRow[] = [];
    for (const line of text.slice(0, end).split('\n')) {
      const row: ExportRow = line.split('\t').map(copyField);
      for (let i = 0; i < row.length; i++) if (numeric[i] && row[i] !== null) row[i] = Number(row[i]);
      rows.push(row);
    }
    yield rows;
  }
  if (rest + decoder.end() !== '') throw new Error('COPY ended inside a row');
}

/**
 * The workspace's voter count (the trigger-kept one) and its lowest and highest voter id (each one step in
 * the (workspace_id, id) index): what an export split over id ranges is planned from.
 */
export async function voterIdSpan(
  db: Executor,
  workspaceId: number,
): Promise<{ total: number; min: number | null; max: number | null }> {
  const ids = (fn: 'min' | 'max') =>
    db
      .selectFrom('voters')
      .where('voters.workspace_id', '=', workspaceId)
      .select((eb) => eb.fn[fn]<number>('voters.id').as('id'));
  const row = await db
    .selectFrom('voter_counts')
    .where('workspace_id', '=', workspaceId)
    .select(['total', ids('min').as('min'), ids('max').as('max')])
    .executeTakeFirst();
  return {
    total: Number(row?.total ?? 0),
    min: row?.min == null ? null : Number(row.min),
    max: row?.max == null ? null : Number(row.max),
  };
}

/**
 * SQLite: the statement of one keyset batch of an export inside an id range, for a thread with its own
 * connection. It is exportVoterBatches' filtered query with an upper bound on the id: the statement's last
 * three parameters (after id, up to id, batch size) are left out of `parameters` for the reader to append.
 */
export function exportRangeStatement(
  db: Db,
  workspaceId: number,
  filters: VoterFilters,
  shape: ExportShape,
): { sql: string; parameters: unknown[] } {
  const marks = [-1, -2, -3];
  const { sql: text, parameters } = filteredVoters(db.kysely, workspaceId, filters)
    .select(exportSelection(db.dialect, shape))
    .where('voters.id', '>', marks[0]!)
    .where('voters.id', '<=', marks[1]!)
    .orderBy('voters.id')
    .limit(marks[2]!)
    .compile();
  const tail = parameters.slice(-3);
  if (tail.some((value, i) => value !== marks[i])) throw new Error('unexpected parameter order');
  return { sql: text, parameters: parameters.slice(0, -3) };
}
