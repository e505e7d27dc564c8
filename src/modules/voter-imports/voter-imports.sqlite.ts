import type SQLite from 'better-sqlite3';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { analyze, dropSamples } from '../../db/sqlite-statistics.ts';
import { ChunkPacer, timed, yieldToOthers } from '../../lib/pacing.ts';
import { type AuditEntry, recordAudit } from '../audit/audit.repository.ts';

import {
  type StagedVoter,
  type VoterImport,
  type ImportProblem,
  stagedColumns,
  voterColumns,
  stagingColumnsSql,
  upsertSet,
  changedCondition,
  epicHeld,
  rollUpdate,
  settleRollNumbers,
  sideWrites,
  StagedKinds,
  ANALYZE_AFTER_ROWS,
  newIdentities,
} from './voter-imports.sql.ts';

/** An import on SQLite: staged into a table of its own, applied in time-sized transactions. */

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
export async function startSqliteImport(
  kysely: Kysely<Database>,
  sqlite: SQLite.Database,
  workspaceId: number,
): Promise<VoterImport> {
  const staging = new SqliteImport(kysely, sqlite, workspaceId);
  await staging.create();
  return staging;
}

class SqliteImport implements VoterImport {
  private readonly table = `temp.voters_import_${++stagingSeq}`;
  private readonly ws: string;
  private readonly seen = new StagedKinds();
  private lastLine = 0;
  private problems: ImportProblem[] = [];
  private stageAll: ((rows: readonly StagedVoter[]) => void) | undefined;

  constructor(
    private readonly kysely: Kysely<Database>,
    private readonly sqlite: SQLite.Database,
    private readonly workspaceId: number,
  ) {
    this.ws = String(Math.trunc(workspaceId));
  }

  /** `fn` on the app's one SQLite connection, in its turn. */
  private locked<T>(fn: () => T): Promise<T> {
    return this.kysely.connection().execute(async () => fn());
  }

  /** The staging table, and the transaction that stages a batch into it. */
  async create(): Promise<void> {
    const { sqlite, table } = this;
    const insert = await this.locked(() => {
      sqlite.exec(
        `CREATE TABLE ${table} (${stagingColumnsSql.replace('line INTEGER', 'line INTEGER PRIMARY KEY')})`,
      );
      return sqlite.prepare(
        `INSERT OR REPLACE INTO ${table} (${stagedColumns.join(', ')}) VALUES (${stagedColumns.map(() => '?').join(', ')})`,
      );
    });
    const values = new Array<unknown>(stagedColumns.length);
    this.stageAll = sqlite.transaction((rows: readonly StagedVoter[]) => {
      for (const r of rows) {
        for (let i = 0; i < stagedColumns.length; i++) values[i] = r[stagedColumns[i]!];
        insert.run(values);
      }
    });
  }

  skipped(): ImportProblem[] {
    return this.problems;
  }

  async stage(rows: readonly StagedVoter[]): Promise<void> {
    if (rows.length === 0) return;
    this.seen.add(rows);
    await this.locked(() => this.stageAll!(rows));
    this.lastLine = rows[rows.length - 1]!.line;
  }

  async apply(now: string, audit?: (imported: number) => AuditEntry): Promise<{ imported: number }> {
    await this.settle();
    let imported: number;
    const restore = await this.locked(() =>
      bulkSettings(this.sqlite, this.lastLine >= SQLITE_APPLY_FIRST_CHUNK),
    );
    try {
      imported = await this.applyChunks(now);
    } finally {
      await this.locked(restore);
      await this.abort();
    }
    // An import changes the shape of the tables (the voters, their tags and custom field values): fresh
    // statistics keep the planner on the right indexes.
    // A large one is analyzed in full, one index at a time with other requests served between two (ANALYZE
    // of the whole table held the process for about a second at a million voters); after any other,
    // `optimize` analyzes the tables whose size changed much or that have no statistics yet (the first
    // import into a new database: without them every search took 1.3-2.6 s until a restart).
    if (audit) await recordAudit(this.kysely, audit(imported));
    if (this.lastLine >= ANALYZE_AFTER_ROWS) {
      for (const analyzed of ['voters', 'voter_tags', 'voter_field_values'])
        await analyzeByIndex(this.sqlite, (fn) => this.locked(fn), analyzed);
      await this.locked(() => dropSamples(this.sqlite));
    } else await this.locked(() => analyze(this.sqlite, 'PRAGMA optimize = 0x10002'));
    return { imported };
  }

  async preview(): Promise<{ imported: number }> {
    try {
      await this.settle();
      const count = this.sqlite.prepare(newIdentities(this.table, this.ws)).pluck();
      return { imported: await this.locked(() => count.get() as number) };
    } finally {
      await this.abort();
    }
  }

  /** Drops the staging table (also once the rows are applied). */
  async abort(): Promise<void> {
    await this.locked(() => {
      this.sqlite.exec(`DROP TABLE IF EXISTS ${this.table}`);
    });
  }

  /**
   * The staged rows into the voters, chunk by chunk by line, each chunk sized to hold the process about 100 ms,
   * other requests running between two. The number of voters created.
   */
  private async applyChunks(now: string): Promise<number> {
    // Ids only grow (AUTOINCREMENT), and nothing else writes during a synchronous chunk: the rows above the
    // highest id before the chunk are the ones it created (counted over those rows only, not the table).
    // `max(id)` alone (not wrapped in coalesce) is SQLite's min/max optimisation: one step down the rowid
    // b-tree instead of a scan of the whole table in every chunk.
    const maxId = this.sqlite.prepare('SELECT max(id) FROM voters').pluck();
    const createdSince = this.sqlite.prepare('SELECT count(*) FROM voters WHERE id > ?').pluck();
    const upsert = this.sqlite.prepare(
      `INSERT INTO voters (workspace_id, ${voterColumns.join(', ')}, created_at, updated_at)
       SELECT ?, ${voterColumns.join(', ')}, ?, ? FROM ${this.table} s
       WHERE line >= ? AND line < ?${this.seen.roll ? ` AND NOT ${epicHeld('s', this.ws)}` : ''} ORDER BY line
       ON CONFLICT (workspace_id, phone, name_key) DO UPDATE SET ${upsertSet}
       WHERE ${changedCondition('IS NOT')}`,
    );
    const lines = ' AND s.line >= ? AND s.line < ?';
    const roll = this.seen.roll
      ? this.sqlite.prepare(rollUpdate(this.table, this.ws, '?', lines))
      : undefined;
    const side = this.seen.side
      ? sideWrites(this.table, this.ws, lines, false).map((text) => this.sqlite.prepare(text))
      : [];
    const chunk = this.sqlite.transaction((from: number, to: number) => {
      const before = (maxId.get() as number | null) ?? 0;
      roll?.run(now, from, to, from, to);
      upsert.run(this.workspaceId, now, now, from, to);
      for (const statement of side) statement.run(from, to);
      return createdSince.get(before) as number;
    });
    let imported = 0;
    const pacer = new ChunkPacer(SQLITE_APPLY_FIRST_CHUNK, 100, SQLITE_APPLY_MAX_CHUNK);
    for (let from = 0; from <= this.lastLine;) {
      const size = pacer.size;
      const { result, ms } = await this.locked(() => timed(() => chunk(from, from + size)));
      imported += result;
      from += size;
      await pacer.pause(size, ms);
    }
    return imported;
  }

  /** The roll numbers settled before anything is applied (see settleRollNumbers). */
  private async settle(): Promise<void> {
    const { sqlite, table } = this;
    if (this.seen.side)
      await this.locked(() =>
        sqlite.exec(`CREATE INDEX ${table}_identity ON ${table.slice(5)} (phone, name_key, line)`),
      );
    if (!this.seen.roll) return;
    await this.locked(() => {
      sqlite.exec(`CREATE INDEX ${table}_epic ON ${table.slice(5)} (epic_number)`);
      sqlite.exec(`CREATE INDEX ${table}_serial ON ${table.slice(5)} (part_number, serial_number)`);
    });
    this.problems = await settleRollNumbers(
      (text) =>
        this.locked(() => {
          const statement = sqlite.prepare(text);
          if (statement.reader) return statement.all() as Array<Record<string, unknown>>;
          statement.run();
          return [];
        }),
      table,
      this.ws,
      [],
    );
  }
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
