import { StringDecoder } from 'node:string_decoder';
import type SQLite from 'better-sqlite3';
import { type Compilable, type Kysely, sql } from 'kysely';
import { escapeLiteral } from 'pg';
import { type CopyToStreamQuery, to as copyTo } from 'pg-copy-streams';
import type { BulkConnections, Db } from '../../db/connect.ts';
import type { Database } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { filteredVoters, type VoterFilters } from '../voters/voters.search.ts';

// The export's reads: keyset batches, COPY on PostgreSQL, and the id ranges the export threads split.

/** The columns of an export, in order. */
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

export type ExportRow = [
  number,
  string,
  string,
  string | null,
  string | null,
  string | null,
  string | null,
  string | null,
  string,
  string,
];

// On PostgreSQL the timestamps are formatted by the server (as toISOString would): parsing two timestamptz
// per row into Dates in JS costs more than the rest of the row.
const isoUtc = (column: 'created_at' | 'updated_at') =>
  sql<string>`to_char(${sql.ref(`voters.${column}`)} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`.as(
    column,
  );

function exportSelection(dialect: Db['dialect']) {
  const plain = exportColumns.slice(0, 8).map((c) => `voters.${c}` as const);
  return dialect === 'postgres'
    ? [...plain, isoUtc('created_at'), isoUtc('updated_at')]
    : [...plain, 'voters.created_at' as const, 'voters.updated_at' as const];
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
  batchSize = 2000,
): AsyncGenerator<ExportRow[]> {
  if (db.raw.dialect !== 'sqlite') throw new Error('a PostgreSQL export reads through COPY');
  const { sqlite } = db.raw;
  // The text is the same for every batch (only `after`, the parameter after the filters', moves): built
  // and prepared once.
  const { sql: text, parameters } = filteredVoters(db.kysely, workspaceId, filters)
    .select(exportSelection(db.dialect))
    .where('voters.id', '>', -1)
    .orderBy('voters.id')
    .limit(batchSize)
    .compile();
  const values = [...parameters];
  const afterAt = values.length - 2;
  if (values[afterAt] !== -1 || values[afterAt + 1] !== batchSize)
    throw new Error('unexpected parameter order');
  let statement: SQLite.Statement | undefined;
  for (let after = 0; ;) {
    values[afterAt] = after;
    const rows = await db.kysely.connection().execute(async () => {
      statement ??= sqlite.prepare(text).raw(true);
      return statement.all(...values) as ExportRow[];
    });
    if (rows.length === 0) return;
    const full = rows.length === batchSize;
    after = rows[rows.length - 1]![0];
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
 * PostgreSQL: the CSV export as the database writes it, `COPY (SELECT ...) TO STDOUT (FORMAT csv, HEADER)`,
 * with the formula guard and the timestamps' format in the query, so no row passes through JS (see copyOut).
 */
export async function* copyVotersCsv(
  db: Kysely<Database>,
  pool: BulkConnections,
  workspaceId: number,
  filters: VoterFilters,
): AsyncGenerator<Buffer> {
  const query = filteredVoters(db, workspaceId, filters)
    .select([
      'voters.id',
      // A phone is always E.164 (+ and digits): a plain number, never guarded, and testing a million of
      // them (every one starts with +) would cost more than the rest of the guard.
      ...exportColumns
        .slice(1, 8)
        .map((c) =>
          c === 'phone'
            ? sql.ref<string>('voters.phone').as(c)
            : sql.raw<string>(sqlFormulaGuard(`voters.${c}`)).as(c),
        ),
      isoUtc('created_at'),
      isoUtc('updated_at'),
    ])
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
): AsyncGenerator<ExportRow[]> {
  const query = filteredVoters(db, workspaceId, filters)
    .select(exportSelection('postgres'))
    .orderBy('voters.id');
  const decoder = new StringDecoder('utf8');
  let rest = '';
  for await (const chunk of copyOut(pool, workspaceId, query, '')) {
    const text = rest + decoder.write(chunk);
    const end = text.lastIndexOf('\n');
    rest = text.slice(end + 1);
    if (end < 0) continue;
    const rows: ExportRow[] = [];
    for (const line of text.slice(0, end).split('\n')) {
      const f = line.split('\t');
      rows.push([
        Number(f[0]),
        copyField(f[1]!) as string,
        copyField(f[2]!) as string,
        copyField(f[3]!),
        copyField(f[4]!),
        copyField(f[5]!),
        copyField(f[6]!),
        copyField(f[7]!),
        f[8]!,
        f[9]!,
      ]);
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
): { sql: string; parameters: unknown[] } {
  const marks = [-1, -2, -3];
  const { sql: text, parameters } = filteredVoters(db.kysely, workspaceId, filters)
    .select(exportSelection(db.dialect))
    .where('voters.id', '>', marks[0]!)
    .where('voters.id', '<=', marks[1]!)
    .orderBy('voters.id')
    .limit(marks[2]!)
    .compile();
  const tail = parameters.slice(-3);
  if (tail.some((value, i) => value !== marks[i])) throw new Error('unexpected parameter order');
  return { sql: text, parameters: parameters.slice(0, -3) };
}
