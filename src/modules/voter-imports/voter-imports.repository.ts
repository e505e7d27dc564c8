import { once } from 'node:events';
import type SQLite from 'better-sqlite3';
import type { Kysely } from 'kysely';
import { type CopyStreamQuery, from as copyFrom } from 'pg-copy-streams';
import type { BulkConnections, Db } from '../../db/connect.ts';
import type { Database } from '../../db/schema.ts';
import { ChunkPacer, timed, yieldToOthers } from '../../lib/pacing.ts';
import { type AuditEntry, auditInsert, recordAudit } from '../audit/audit.repository.ts';

// The import's writes: rows staged as the file streams in, then one set-based upsert.

/** One checked row of an import file, ready to write. */
export interface StagedVoter {
  /** Line of the file where the row starts: the later of two rows with one identity wins. */
  line: number;
  name: string;
  name_key: string;
  /** null for a row from the roll without one (it has an EPIC number). */
  phone: string | null;
  email: string | null;
  constituency: string | null;
  constituency_key: string | null;
  booth: string | null;
  booth_key: string | null;
  ward: string | null;
  ward_key: string | null;
  address: string | null;
  // The voter record (the contract's fourth part); null where the file has no value.
  epic_number: string | null;
  part_number: number | null;
  serial_number: number | null;
  page_number: number | null;
  house_number: string | null;
  relation_name: string | null;
  relation_type: string | null;
  gender: string | null;
  name_local: string | null;
  language: string | null;
  birth_date: string | null;
  birth_key: string | null;
  support_level: number | null;
  household_key: string | null;
  /** JSON `[[key, label], ...]`: the row's tags (replacing the voter's), or null to keep them. */
  tags: string | null;
  /** JSON `[[key, value_text, value_number], ...]`: custom field values given, or null. */
  fields: string | null;
}

/**
 * An import in progress: rows are staged as the file streams in, and only `apply` touches `voters`, so a
 * file refused part-way (413, not UTF-8, ...) is `abort`ed and leaves the voters as they were.
 */
export interface VoterImport {
  stage(rows: readonly StagedVoter[]): Promise<void>;
  /**
   * Upserts the staged rows on the identity (the later line wins; a field a row leaves empty is kept);
   * returns how many voters were created. `audit` gives the audit entry for that count, written with the
   * rows: in the same transaction on PostgreSQL (the rows are committed with their entry or not at all), right
   * after the last chunk on SQLite.
   */
  apply(now: string, audit?: (imported: number) => AuditEntry): Promise<{ imported: number }>;
  /** A dry run: how many voters `apply` would create; then the staged rows are dropped and nothing is written. */
  preview(): Promise<{ imported: number }>;
  abort(): Promise<void>;
  /** Rows left out at apply (or preview) because their roll numbers belong to another voter. */
  skipped(): ImportProblem[];
}

export interface ImportProblem {
  row: number;
  field: string;
  message: string;
}

/** The voter record's columns an import writes (merged as the optional fields are). */
const recordColumns = [
  'epic_number',
  'part_number',
  'serial_number',
  'page_number',
  'house_number',
  'relation_name',
  'relation_type',
  'gender',
  'name_local',
  'language',
  'birth_date',
  'birth_key',
  'support_level',
  'household_key',
] as const;

const stagedColumns = [
  'line',
  'name',
  'name_key',
  'phone',
  'email',
  'constituency',
  'constituency_key',
  'booth',
  'booth_key',
  'ward',
  'ward_key',
  'address',
  ...recordColumns,
  'tags',
  'fields',
] as const;

/** The staged columns that are columns of `voters` (tags and fields go to tables of their own). */
const voterColumns = stagedColumns.slice(1, -2) as ReadonlyArray<(typeof stagedColumns)[number]>;

const integerColumns = new Set<string>([
  'line',
  'part_number',
  'serial_number',
  'page_number',
  'support_level',
]);

/** The staging table's columns: integers as integers, every other one text. */
const stagingColumnsSql = stagedColumns
  .map((c) => `${c} ${integerColumns.has(c) ? 'INTEGER' : 'TEXT'}`)
  .join(', ');

/** The optional fields: an import row with none of them (an empty cell, or a column the file lacks) keeps it. */
const mergedColumns = [
  'email',
  'constituency',
  'constituency_key',
  'booth',
  'booth_key',
  'ward',
  'ward_key',
  'address',
  ...recordColumns,
] as const;

/** An import changes only what the file says: the name (same identity, maybe other case) and each value given. */
const upsertSet = [
  'name = excluded.name',
  ...mergedColumns.map((c) => `${c} = coalesce(excluded.${c}, voters.${c})`),
  'updated_at = excluded.updated_at',
].join(', ');

/** A row that would not change is left alone: its updated_at stays, and no search-index work is done. */
function changedCondition(distinct: 'IS NOT' | 'IS DISTINCT FROM'): string {
  return [
    `voters.name ${distinct} excluded.name`,
    ...mergedColumns.map((c) => `(excluded.${c} IS NOT NULL AND voters.${c} ${distinct} excluded.${c})`),
  ].join(' OR ');
}

/** A staged row whose EPIC number a voter of the workspace holds: it updates that voter (rollUpdate). */
const epicHeld = (s: string, ws: string) =>
  `(${s}.epic_number IS NOT NULL AND EXISTS (SELECT 1 FROM voters e WHERE e.workspace_id = ${ws} AND e.epic_number = ${s}.epic_number))`;

/**
 * Rows whose EPIC number a voter holds update that voter, whatever their name and phone: every field the
 * row gives except the name and phone (the roll's identity is the EPIC number; a phone is set only on a
 * voter that has none and no one else has it with that name).
 */
function rollUpdate(table: string, ws: string, now: string, lines: string): string {
  // Driven by the chunk's EPIC numbers (an index seek each, and one into the staging table for the row's
  // values): an UPDATE ... FROM let SQLite walk every voter of the workspace for each chunk, and the chunks
  // shrank to the pacer's least as the table grew.
  const values = [
    ...mergedColumns.map((c) => `coalesce(s.${c}, voters.${c})`),
    `CASE WHEN voters.phone IS NULL AND s.phone IS NOT NULL AND NOT EXISTS (SELECT 1 FROM voters o
       WHERE o.workspace_id = ${ws} AND o.phone = s.phone AND o.name_key = voters.name_key) THEN s.phone ELSE voters.phone END`,
    now,
  ];
  return `UPDATE voters SET (${[...mergedColumns, 'phone', 'updated_at'].join(', ')}) =
      (SELECT ${values.join(', ')} FROM ${table} s WHERE s.epic_number = voters.epic_number${lines})
    WHERE voters.workspace_id = ${ws}
      AND voters.epic_number IN (SELECT s.epic_number FROM ${table} s WHERE s.epic_number IS NOT NULL${lines})`;
}

/** A query that gives a row when two rows of `table` (of those `where` keeps) have the same `columns`. */
const repeatsSql = (table: string, columns: string, where = 'true') =>
  `SELECT 1 FROM ${table} WHERE ${where} GROUP BY ${columns} HAVING count(*) > 1 LIMIT 1`;

/**
 * Before anything is applied: one row per EPIC number (the file's last), and rows whose (part, serial) another
 * voter holds, or a later row of the file, left out and reported. Returns the rows left out.
 */
async function settleRollNumbers(
  run: (text: string, values: unknown[]) => Promise<Array<Record<string, unknown>>>,
  table: string,
  ws: string,
  values: unknown[],
): Promise<ImportProblem[]> {
  // Each search for the file's repeats (a lookup of the latest line for every row) runs only when a grouping says
  // there are some: a roll has none, and the searches were 3.5 of the 6.7 s spent settling a million rows.
  const repeats = async (given: string, columns: string) =>
    (await run(repeatsSql(table, columns, given), [])).length > 0;
  if (await repeats('epic_number IS NOT NULL', 'epic_number'))
    await run(
      `DELETE FROM ${table} WHERE epic_number IS NOT NULL AND line < (SELECT max(t.line) FROM ${table} t WHERE t.epic_number = ${table}.epic_number)`,
      [],
    );
  const inFile = (await repeats(
    'part_number IS NOT NULL AND serial_number IS NOT NULL',
    'part_number, serial_number',
  ))
    ? await run(
        `SELECT s.line AS line, (SELECT max(t.line) FROM ${table} t WHERE t.part_number = s.part_number AND t.serial_number = s.serial_number) AS later
         FROM ${table} s WHERE s.part_number IS NOT NULL AND s.serial_number IS NOT NULL
           AND s.line < (SELECT max(t.line) FROM ${table} t WHERE t.part_number = s.part_number AND t.serial_number = s.serial_number)`,
        [],
      )
    : [];
  const taken = await run(
    `SELECT s.line AS line FROM ${table} s JOIN voters v ON v.workspace_id = ${ws}
       AND v.part_number = s.part_number AND v.serial_number = s.serial_number
     WHERE s.part_number IS NOT NULL AND s.serial_number IS NOT NULL
       AND NOT (s.epic_number IS NOT NULL AND v.epic_number = s.epic_number)
       AND NOT (s.phone IS NOT NULL AND v.phone = s.phone AND v.name_key = s.name_key AND NOT ${epicHeld('s', ws)})`,
    values,
  );
  const problems: ImportProblem[] = [
    ...inFile.map((r) => ({
      row: Number(r.line),
      field: 'serial_number',
      message: `line ${Number(r.later)} of the file has the same part_number and serial_number; the later line is kept.`,
    })),
    ...taken.map((r) => ({
      row: Number(r.line),
      field: 'serial_number',
      message: 'another voter of the workspace has this part_number and serial_number.',
    })),
  ];
  const lines = [...new Set(problems.map((p) => p.row))];
  for (let i = 0; i < lines.length; i += 500)
    await run(`DELETE FROM ${table} WHERE line IN (${lines.slice(i, i + 500).join(', ')})`, []);
  return problems.sort((a, b) => a.row - b.row);
}

/**
 * The rows' tags and custom field values, written after their voters (a voter found by EPIC number, or by
 * name and phone). A row's tags replace the voter's; each field given replaces its value. Within one file the
 * later row wins. On PostgreSQL, `oneRowPerVoter` (no two rows of the file have one voter, and a row names each
 * field once) lets the field values go in without DISTINCT ON. They still go in by voter id: each insert then lands
 * beside the last in the tables' b-trees (in the hash join's order, the tags took 10.8 s instead of 4.9, the
 * values 24.3 instead of 14.0, at a million rows).
 */
function sideWrites(table: string, ws: string, lines: string, pg: boolean, oneRowPerVoter = false): string[] {
  const elements = (column: string) =>
    pg ? `jsonb_array_elements(x.${column}::jsonb) AS j(e)` : `json_each(x.${column}) AS j`;
  const at = (i: number) => (pg ? `(j.e->>${i})` : `json_extract(j.value, '$[${i}]')`);
  const num = pg ? `(j.e->>2)::double precision` : at(2);
  // The row's voter: the one holding its EPIC number, else the one with its name and phone. PostgreSQL has it in
  // voters_import_ids already (found once in apply); SQLite seeks it (two index seeks a row).
  const source = pg ? `${table} s JOIN voters_import_ids i ON i.line = s.line` : `${table} s`;
  const target = pg
    ? 'i.voter_id'
    : `coalesce(
      (SELECT v.id FROM voters v WHERE v.workspace_id = ${ws} AND v.epic_number = s.epic_number),
      (SELECT v.id FROM voters v WHERE v.workspace_id = ${ws} AND v.phone = s.phone AND v.name_key = s.name_key))`;
  // The file's last row for its voter that gives tags: its tags are the voter's. Rows with one EPIC number are
  // one row already (settleRollNumbers); rows with one name and phone are found through SQLite's staging index
  // (PostgreSQL's statements join the whole file: a hash anti-join, which needs no index).
  const lastTags = `s.tags IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ${table} l WHERE l.phone = s.phone
      AND l.name_key = s.name_key AND l.line > s.line AND l.tags IS NOT NULL)`;
  const tagged = `(SELECT s.line AS line, s.tags AS tags, ${target} AS id FROM ${source} WHERE ${lastTags}${lines}) x`;
  return [
    `INSERT INTO voter_tag_names (workspace_id, key, label)
       SELECT ${ws}, ${at(0)}, ${at(1)} FROM (SELECT s.line AS line, s.tags AS tags FROM ${table} s
         WHERE s.tags IS NOT NULL${lines}) x, ${elements('tags')}
       WHERE true ORDER BY x.line ON CONFLICT DO NOTHING`,
    `DELETE FROM voter_tags WHERE voter_id IN (SELECT x.id FROM ${tagged} WHERE x.id IS NOT NULL)`,
    `INSERT INTO voter_tags (workspace_id, tag_key, voter_id)
       SELECT ${ws}, ${at(0)}, x.id FROM ${tagged}, ${elements('tags')}
       WHERE x.id IS NOT NULL${pg ? ' ORDER BY x.id' : ''} ON CONFLICT DO NOTHING`,
    `INSERT INTO voter_field_values (voter_id, workspace_id, field_key, value_text, value_number)
       SELECT ${pg && !oneRowPerVoter ? `DISTINCT ON (x.id, ${at(0)})` : ''} x.id, ${ws}, ${at(0)}, ${at(1)}, ${num}
       FROM (SELECT s.line AS line, s.fields AS fields, ${target} AS id FROM ${source}
         WHERE s.fields IS NOT NULL${lines}) x, ${elements('fields')}
       WHERE x.id IS NOT NULL
       ORDER BY x.id${pg && oneRowPerVoter ? '' : `, ${at(0)}, x.line ${pg ? 'DESC' : 'ASC'}`}
       ON CONFLICT (voter_id, field_key) DO UPDATE SET value_text = excluded.value_text, value_number = excluded.value_number`,
  ];
}

export async function startVoterImport(db: Db, workspaceId: number): Promise<VoterImport> {
  return db.raw.dialect === 'sqlite'
    ? startSqliteImport(db.kysely, db.raw.sqlite, workspaceId)
    : startPostgresImport(db.kysely, db.raw.bulkFor, workspaceId);
}

let stagingSeq = 0;
/** Lines applied by the first SQLite transaction; the next ones are sized by time (ChunkPacer). */
const SQLITE_APPLY_FIRST_CHUNK = 1_000;
const SQLITE_APPLY_MAX_CHUNK = 20_000;
/** Page cache while applying an import (KiB). */
const SQLITE_IMPORT_CACHE_KIB = 65_536;

/**
 * SQLite: rows are staged in a TEMP table (this connection only, outside the database file), each batch in
 * one synchronous transaction taken under Kysely's connection lock; `apply` then runs set-based
 * INSERT ... SELECT ... ON CONFLICT DO UPDATE in chunks of lines, each a synchronous transaction.
 */
async function startSqliteImport(
  kysely: Kysely<Database>,
  sqlite: SQLite.Database,
  workspaceId: number,
): Promise<VoterImport> {
  const table = `temp.voters_import_${++stagingSeq}`;
  const locked = <T>(fn: () => T): Promise<T> => kysely.connection().execute(async () => fn());
  const insert = await locked(() => {
    sqlite.exec(
      `CREATE TABLE ${table} (${stagingColumnsSql.replace('line INTEGER', 'line INTEGER PRIMARY KEY')})`,
    );
    return sqlite.prepare(
      `INSERT OR REPLACE INTO ${table} (${stagedColumns.join(', ')}) VALUES (${stagedColumns.map(() => '?').join(', ')})`,
    );
  });
  let lastLine = 0;
  const seen = new StagedKinds();
  const values = new Array<unknown>(stagedColumns.length);
  const stageAll = sqlite.transaction((rows: readonly StagedVoter[]) => {
    for (const r of rows) {
      for (let i = 0; i < stagedColumns.length; i++) values[i] = r[stagedColumns[i]!];
      insert.run(values);
    }
  });
  const drop = () =>
    locked(() => {
      sqlite.exec(`DROP TABLE IF EXISTS ${table}`);
    });
  const ws = String(Math.trunc(workspaceId));
  let skipped: ImportProblem[] = [];
  /** The roll numbers settled before anything is applied (see settleRollNumbers). */
  const settle = async () => {
    if (seen.side)
      await locked(() =>
        sqlite.exec(`CREATE INDEX ${table}_identity ON ${table.slice(5)} (phone, name_key, line)`),
      );
    if (!seen.roll) return;
    await locked(() => {
      sqlite.exec(`CREATE INDEX ${table}_epic ON ${table.slice(5)} (epic_number)`);
      sqlite.exec(`CREATE INDEX ${table}_serial ON ${table.slice(5)} (part_number, serial_number)`);
    });
    skipped = await settleRollNumbers(
      (text) =>
        locked(() => {
          const statement = sqlite.prepare(text);
          if (statement.reader) return statement.all() as Array<Record<string, unknown>>;
          statement.run();
          return [];
        }),
      table,
      ws,
      [],
    );
  };
  return {
    skipped: () => skipped,
    stage: async (rows) => {
      if (rows.length === 0) return;
      seen.add(rows);
      await locked(() => stageAll(rows));
      lastLine = rows[rows.length - 1]!.line;
    },
    apply: async (now, audit) => {
      await settle();
      // Ids only grow (AUTOINCREMENT), and nothing else writes during a synchronous chunk: the rows above the
      // highest id before the chunk are the ones it created (counted over those rows only, not the table).
      // `max(id)` alone (not wrapped in coalesce) is SQLite's min/max optimisation: one step down the rowid
      // b-tree instead of a scan of the whole table in every chunk.
      const maxId = sqlite.prepare('SELECT max(id) FROM voters').pluck();
      const createdSince = sqlite.prepare('SELECT count(*) FROM voters WHERE id > ?').pluck();
      const upsert = sqlite.prepare(
        `INSERT INTO voters (workspace_id, ${voterColumns.join(', ')}, created_at, updated_at)
         SELECT ?, ${voterColumns.join(', ')}, ?, ? FROM ${table} s
         WHERE line >= ? AND line < ?${seen.roll ? ` AND NOT ${epicHeld('s', ws)}` : ''} ORDER BY line
         ON CONFLICT (workspace_id, phone, name_key) DO UPDATE SET ${upsertSet}
         WHERE ${changedCondition('IS NOT')}`,
      );
      const lines = ' AND s.line >= ? AND s.line < ?';
      const roll = seen.roll ? sqlite.prepare(rollUpdate(table, ws, '?', lines)) : undefined;
      const side = seen.side ? sideWrites(table, ws, lines, false).map((text) => sqlite.prepare(text)) : [];
      const chunk = sqlite.transaction((from: number, to: number) => {
        const before = (maxId.get() as number | null) ?? 0;
        roll?.run(now, from, to, from, to);
        upsert.run(workspaceId, now, now, from, to);
        for (const statement of side) statement.run(from, to);
        return createdSince.get(before) as number;
      });
      let imported = 0;
      // Chunks are sized to hold the process about 100 ms each, and other requests run between two.
      const pacer = new ChunkPacer(SQLITE_APPLY_FIRST_CHUNK, 100, SQLITE_APPLY_MAX_CHUNK);
      const restore = await locked(() => bulkSettings(sqlite, lastLine >= SQLITE_APPLY_FIRST_CHUNK));
      try {
        for (let from = 0; from <= lastLine;) {
          const size = pacer.size;
          const { result, ms } = await locked(() => timed(() => chunk(from, from + size)));
          imported += result;
          from += size;
          await pacer.pause(size, ms);
        }
      } finally {
        await locked(restore);
        await drop();
      }
      // An import changes the shape of the tables (the voters, their tags and custom field values): fresh
      // statistics keep the planner on the right indexes.
      // A large one is analyzed in full, one index at a time with other requests served between two (ANALYZE
      // of the whole table held the process for about a second at a million voters); after any other,
      // `optimize` analyzes the tables whose size changed much or that have no statistics yet (the first
      // import into a new database: without them every search took 1.3-2.6 s until a restart).
      if (audit) await recordAudit(kysely, audit(imported));
      if (lastLine >= ANALYZE_AFTER_ROWS)
        for (const analyzed of ['voters', 'voter_tags', 'voter_field_values'])
          await analyzeByIndex(sqlite, locked, analyzed);
      else await locked(() => sqlite.pragma('optimize = 0x10002'));
      return { imported };
    },
    preview: async () => {
      try {
        await settle();
        const count = sqlite.prepare(newIdentities(table, ws)).pluck();
        return { imported: await locked(() => count.get() as number) };
      } finally {
        await drop();
      }
    },
    abort: drop,
  };
}

/** FTS5's default `automerge`: a level of the search index is merged once it holds this many segments. */
const FTS5_DEFAULT_AUTOMERGE = 4;
/** Segments per level of the search index while a large import is applied (see bulkSettings). */
const SQLITE_IMPORT_AUTOMERGE = 16;

/**
 * The connection's settings for an import's chunks, and a function that puts them back. Measured at a million
 * voters (docs/performance.md, 28 November, evening), the import spent most of its time in the trigram search
 * index (voters_fts): each chunk's commit writes a small segment of it, and FTS5 merges those segments level
 * by level, deleting each merged segment's pages, which it reads back from the file (pages long gone from the
 * cache). So, for the apply only:
 * - a 64 MiB page cache (the connection's is 32 MiB): each row lands at scattered places of six b-trees;
 * - for a large import, `automerge` 16 instead of FTS5's 4: a level is merged once it holds 16 segments, so
 *   each row's index entries are merged (and read back, and deleted) about half as often: 0.16-0.22x of the
 *   bulk load to 0.45-0.65x in four runs. A search reads a few more segments until later writes merge them
 *   (FTS5 merges a little at every write). The setting lives in the index's own config table, shared by every
 *   connection, and goes back to 4 at the end; an import that ends while another runs sets it back early, and
 *   a process that dies mid-import leaves it at 16 until the next large import ends: only speed, either way.
 * Memory-mapped reads (`mmap_size`) would take about a third more off, but a mapped page counts in the
 * process's RSS: the server's peak during a million-voter import was 1,048 MB with the file mapped throughout
 * and 380 MB mapped one chunk at a time, against 263 MB without and a goal of 300 MB. They are not used.
 */
function bulkSettings(sqlite: SQLite.Database, large: boolean): () => void {
  const cacheSize = sqlite.pragma('cache_size', { simple: true }) as number;
  // FTS5 refuses a bound parameter for a setting's value: the constant is written into the statement.
  const automerge = (value: number) =>
    sqlite.exec(`INSERT INTO voters_fts(voters_fts, rank) VALUES ('automerge', ${Math.trunc(value)})`);
  sqlite.pragma(`cache_size = -${SQLITE_IMPORT_CACHE_KIB}`);
  if (large) automerge(SQLITE_IMPORT_AUTOMERGE);
  return () => {
    if (large) automerge(FTS5_DEFAULT_AUTOMERGE);
    sqlite.pragma(`cache_size = ${cacheSize}`);
  };
}

/**
 * ANALYZE of a table, one index at a time (the statistics are the same as `ANALYZE table`'s), letting other
 * requests run between two: each index's pass is a fraction of the table's.
 */
async function analyzeByIndex(
  sqlite: SQLite.Database,
  locked: <T>(fn: () => T) => Promise<T>,
  table: string,
): Promise<void> {
  const indexes = await locked(
    () => sqlite.prepare(`SELECT name FROM pragma_index_list('${table}')`).pluck().all() as string[],
  );
  for (const index of indexes) {
    await locked(() => sqlite.exec(`ANALYZE "${index.replace(/"/g, '""')}"`));
    await yieldToOthers();
  }
}

/**
 * The staged voters that the workspace does not have yet: what an apply would create. A row whose EPIC number
 * a voter holds updates that voter; a row without a phone (from the roll) is a voter of its own, by its EPIC
 * number, or by its line where it has neither.
 */
const newIdentities = (table: string, workspace: string) =>
  `SELECT count(*) AS imported FROM (SELECT DISTINCT phone, name_key, CASE WHEN phone IS NULL THEN coalesce(epic_number, CAST(line AS TEXT)) END AS epic
     FROM ${table} s WHERE NOT ${epicHeld('s', workspace)}) s
   WHERE s.phone IS NULL OR NOT EXISTS (SELECT 1 FROM voters v WHERE v.workspace_id = ${workspace} AND v.phone = s.phone AND v.name_key = s.name_key)`;

/** What the staged rows hold, for the apply steps they need (a file of the old columns takes none of them). */
class StagedKinds {
  /** An EPIC or a part number: the roll's identities are settled and applied. */
  roll = false;
  /** Tags or custom field values: written after their voters. */
  side = false;

  add(rows: readonly StagedVoter[]): void {
    for (const r of rows) {
      if (!this.roll && (r.epic_number !== null || r.part_number !== null)) this.roll = true;
      if (!this.side && (r.tags !== null || r.fields !== null)) this.side = true;
    }
  }
}

/**
 * VACUUM of the voters, their search table, tags and custom field values after a large PostgreSQL import, in
 * the background (see apply): the visibility map, and the trigram indexes' pending entries merged. Without it
 * a count over an index read every matching row of the table besides its index entry (an index-only scan
 * with 250,000 heap fetches: 50 ms, against 30 ms after it).
 */
function vacuumLater(connectFor: BulkConnections, workspaceId: number): void {
  void (async () => {
    const client = await connectFor(workspaceId);
    try {
      await client.query('VACUUM voters, voter_search, voter_tags, voter_field_values');
      client.release();
    } catch (error) {
      client.release(error as Error);
    }
  })().catch(() => {
    // A pool closed at shutdown, or no connection free: autovacuum gets there later.
  });
}

/** An import of at least this many rows refreshes the table's statistics on PostgreSQL. */
const ANALYZE_AFTER_ROWS = 10_000;

const COPY_SPECIAL = /[\\\t\n\r]/;
const COPY_SPECIAL_G = /[\\\t\n\r]/g;
const copyEscapes: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

/** A value in COPY's text format. */
function copyValue(value: string | number | null): string {
  if (value === null) return '\\N';
  if (typeof value === 'number') return String(value);
  return COPY_SPECIAL.test(value) ? value.replace(COPY_SPECIAL_G, (c) => copyEscapes[c]!) : value;
}

/**
 * PostgreSQL: one transaction on one pooled connection for the whole import. Rows stream into a temporary
 * table through COPY; `apply` is one set-based upsert (per identity: the last line's name and, per field, the last value
 * given, as SQLite's upsert in line order gives)
 * and COMMIT; `abort` rolls everything back.
 */
async function startPostgresImport(
  kysely: Kysely<Database>,
  connectFor: BulkConnections,
  workspaceId: number,
): Promise<VoterImport> {
  const client = await connectFor(workspaceId);
  let copy: CopyStreamQuery | undefined;
  let done = false;
  const release = (error?: Error) => {
    if (done) return;
    done = true;
    client.release(error);
  };
  try {
    await client.query('BEGIN');
    // No JIT: the import's statements cross jit_above_cost at a hundred thousand rows, and compiling them took
    // about a second of a million-row import that their plans (scans, hash joins, inserts) do not win back.
    await client.query(`SELECT set_config('jit', 'off', true)`);
    await client.query(`CREATE TEMP TABLE voters_import (${stagingColumnsSql}) ON COMMIT DROP`);
    copy = client.query(copyFrom(`COPY voters_import (${stagedColumns.join(', ')}) FROM STDIN`));
  } catch (error) {
    release(error as Error);
    throw error;
  }
  const stream = copy;
  let failure: Error | undefined;
  stream.on('error', (error: Error) => {
    failure ??= error;
  });
  let staged = 0;
  const finished = new Promise<void>((resolve, reject) => {
    stream.on('finish', resolve);
    stream.on('error', reject);
  });
  finished.catch(() => {}); // observed here so it is never unhandled; awaited (and thrown) where the copy ends

  const seen = new StagedKinds();
  const ws = String(Math.trunc(workspaceId));
  let skipped: ImportProblem[] = [];
  /** After the copy: the roll numbers settled (see settleRollNumbers) before anything is applied. */
  const settle = async () => {
    stream.end();
    await finished;
    if (seen.roll) {
      await client.query('CREATE INDEX ON voters_import (epic_number)');
      await client.query('CREATE INDEX ON voters_import (part_number, serial_number)');
    }
    // The file's size for the planner: the roll's, the tags' and the values' statements join the whole file (hash
    // joins; an index on (phone, name_key, line) for the tags' "last row" test went unused, and cost a second at
    // a million rows).
    if (seen.roll || seen.side) await client.query('ANALYZE voters_import');
    if (seen.roll)
      skipped = await settleRollNumbers(
        async (text, values) => (await client.query(text, values)).rows as Array<Record<string, unknown>>,
        'voters_import',
        ws,
        [],
      );
  };
  return {
    skipped: () => skipped,
    stage: async (rows) => {
      if (failure) throw failure;
      seen.add(rows);
      let text = '';
      for (const r of rows) {
        for (let i = 0; i < stagedColumns.length; i++)
          text += (i === 0 ? '' : '\t') + copyValue(r[stagedColumns[i]!]);
        text += '\n';
      }
      staged += rows.length;
      if (!stream.write(text)) await once(stream, 'drain');
    },
    apply: async (now, audit) => {
      try {
        await settle();
        if (seen.roll) await client.query(rollUpdate('voters_import', ws, '$1::timestamptz', ''), [now]);
        // A row from the roll without a phone is a voter of its own (its EPIC number is its identity); a row with
        // neither (its phone was left out as bad) is one of its own too, never merged with a namesake.
        const identity =
          'phone, name_key, CASE WHEN phone IS NULL THEN coalesce(epic_number, CAST(line AS TEXT)) END';
        const unheld = seen.roll ? ` WHERE NOT ${epicHeld('s', ws)}` : '';
        // Rows of one identity are merged (the last line's name, each field's last value given). A file with
        // no such repeats (a roll: one line per voter) skips the merge: its fifteen sorted aggregates over a
        // million rows were 17 of the upsert's 43 s. Each row is then its own merge, so the result is the same.
        const repeats = await client.query(repeatsSql('voters_import', identity));
        // New voters' ids follow the file's lines. Without repeats the staging table is read as COPY wrote it (a
        // temporary table is never scanned in parallel nor from the middle, as a large table's synchronized scans
        // are), so no sort is asked for: sorting a million wide rows by line took a second and spilled to disk.
        const merge = repeats.rowCount !== 0;
        const src = !merge
          ? `SELECT line, phone, name_key, name, ${mergedColumns.join(', ')} FROM voters_import s${unheld}`
          : `SELECT max(line) AS line, phone, name_key, (array_agg(name ORDER BY line DESC))[1] AS name,
               ${mergedColumns.map((c) => `(array_agg(${c} ORDER BY line DESC) FILTER (WHERE ${c} IS NOT NULL))[1] AS ${c}`).join(',\n               ')}
             FROM voters_import s${unheld}
             GROUP BY ${identity}`;
        const result = await client.query<{ imported: number }>(
          `WITH src AS (${src}), up AS (
             INSERT INTO voters (workspace_id, ${voterColumns.join(', ')}, created_at, updated_at)
             SELECT $1, ${voterColumns.join(', ')}, $2, $2 FROM src${merge ? ' ORDER BY line' : ''}
             ON CONFLICT (workspace_id, phone, name_key) DO UPDATE SET ${upsertSet}
             WHERE ${changedCondition('IS DISTINCT FROM')}
             RETURNING (xmax = 0) AS inserted
           )
           SELECT count(*) FILTER (WHERE inserted) AS imported FROM up`,
          [workspaceId, now],
        );
        const imported = Number(result.rows[0]?.imported ?? 0);
        if (seen.side) {
          // Each row's voter, found once for the tags and the custom field values (by EPIC number, then by name
          // and phone, as sideWrites' SQLite seeks do), in two hash joins over the file, into a narrow table of
          // its own. At a million rows, index seeks for each of three statements took 17 s, and an UPDATE of the
          // wide staging rows (a new version of each, and of its three index entries) 9.4 s.
          await client.query(
            `CREATE TEMP TABLE voters_import_ids ON COMMIT DROP AS
             SELECT s.line, coalesce(e.id, p.id) AS voter_id FROM voters_import s
             LEFT JOIN voters e ON e.workspace_id = ${ws} AND e.epic_number = s.epic_number
             LEFT JOIN voters p ON e.id IS NULL AND p.workspace_id = ${ws} AND p.phone = s.phone
               AND p.name_key = s.name_key`,
          );
          await client.query('ANALYZE voters_import_ids');
          const shared = await client.query(
            repeatsSql('voters_import_ids', 'voter_id', 'voter_id IS NOT NULL'),
          );
          for (const text of sideWrites('voters_import', ws, '', true, shared.rowCount === 0))
            await client.query(text);
        }
        // Statistics in the import's own transaction (ANALYZE counts the rows it inserted), so they commit with
        // the rows: no read after a large import meets the tables without them (the background VACUUM
        // (ANALYZE) brought them seconds to a minute later).
        if (staged >= ANALYZE_AFTER_ROWS)
          await client.query('ANALYZE voters, voter_search, voter_tags, voter_field_values');
        if (audit) {
          const entry = auditInsert(kysely, audit(imported)).compile();
          await client.query(entry.sql, entry.parameters as unknown[]);
        }
        await client.query('COMMIT');
        release();
        // Without fresh statistics after a bulk load the planner guesses a handful of rows per workspace
        // and picks plans (bitmap scan + sort) that make the export's keyset pages quadratic: a large import
        // analyzes before it commits (above). VACUUM sets the visibility map, so counting a filtered list is
        // an index-only scan instead of a visit to every matching row. It runs after the answer, on a
        // connection of its own: the import's client is not kept waiting for it (nor is a shutdown that would
        // cut it short with the rows committed).
        if (staged >= ANALYZE_AFTER_ROWS) vacuumLater(connectFor, workspaceId);
        return { imported };
      } catch (error) {
        // Cleanup after a failure (the connection may be gone): the error thrown is the first one.
        await client.query('ROLLBACK').catch(() => {});
        release(error as Error);
        throw error;
      }
    },
    preview: async () => {
      try {
        await settle();
        const result = await client.query<{ imported: string }>(newIdentities('voters_import', ws));
        await client.query('ROLLBACK');
        release();
        return { imported: Number(result.rows[0]?.imported ?? 0) };
      } catch (error) {
        // Cleanup after a failure (the connection may be gone): the error thrown is the first one.
        await client.query('ROLLBACK').catch(() => {});
        release(error as Error);
        throw error;
      }
    },
    abort: async () => {
      if (done) return;
      try {
        if (!stream.writableEnded) {
          stream.end();
          await finished.catch(() => {}); // aborting: the copy's own error no longer matters
        }
        await client.query('ROLLBACK');
        release();
      } catch (error) {
        // A connection in an unknown state is closed rather than returned to the pool.
        release(error as Error);
      }
    },
  };
}
