import type { MessagePort } from 'node:worker_threads';
import SQLite from 'better-sqlite3';
import { analyze, dropSamples } from '../../db/sqlite-statistics.ts';
import { timed } from '../../lib/pacing.ts';
import {
  type StagedVoter,
  stagedColumns,
  voterColumns,
  stagingColumnsSql,
  upsertSet,
  changedCondition,
  epicHeld,
  rollUpdate,
  sideWrites,
} from './voter-imports.sql.ts';

/**
 * Page cache while applying an import (KiB): the app connection's size. 64 MiB in the import's thread took the
 * server's peak RSS to 292 MB during a 200,000-voter import and 306 MB in the exports after it (the thread's
 * freed cache stays resident), against 260 and 277 MB with 32 MiB, for an import 0.78x of the bulk load against
 * 0.73x (within the runs' noise).
 */
const SQLITE_IMPORT_CACHE_KIB = 32_768;
/** FTS5's default `automerge`: a level of the search index is merged once it holds this many segments. */
const FTS5_DEFAULT_AUTOMERGE = 4;
/** Segments per level of the search index while a large import is applied (see bulkSettings). */
const SQLITE_IMPORT_AUTOMERGE = 16;
/**
 * How long the import's thread waits for the database's write lock while the app's connection holds it (a
 * request's transaction, a campaign's fill): waiting blocks that thread only.
 */
const THREAD_BUSY_TIMEOUT_MS = 60_000;

/** What the staged file holds besides the voters' own columns (voter-imports.sql.ts's StagedKinds). */
export interface StagedSeen {
  roll: boolean;
  side: boolean;
}

/**
 * A SQLite voter import's statements on one connection, each method synchronous: the rows staged into a TEMP
 * table of that connection, then applied chunk by chunk. voter-imports.sqlite.ts runs them on the app's own
 * connection (an in-memory database, which no other connection can open) or, for a database file, in a thread
 * of the import's own with its own connection (runImportThread): there a chunk can be a longer transaction,
 * since the app's thread goes on serving reads meanwhile (WAL), and writes wait at most one chunk.
 */
export class ImportStatements {
  private readonly ws: string;
  private stageAll: ((rows: readonly StagedVoter[]) => void) | undefined;
  private chunk: ((from: number, to: number) => number) | undefined;
  private restore: (() => void) | undefined;

  constructor(
    private readonly sqlite: SQLite.Database,
    private readonly table: string,
    private readonly workspaceId: number,
  ) {
    this.ws = String(Math.trunc(workspaceId));
  }

  /** The staging table, and the transaction that stages a batch into it. */
  create(): void {
    const { sqlite, table } = this;
    sqlite.exec(
      `CREATE TABLE ${table} (${stagingColumnsSql.replace('line INTEGER', 'line INTEGER PRIMARY KEY')})`,
    );
    const insert = sqlite.prepare(
      `INSERT OR REPLACE INTO ${table} (${stagedColumns.join(', ')}) VALUES (${stagedColumns.map(() => '?').join(', ')})`,
    );
    const values = new Array<unknown>(stagedColumns.length);
    this.stageAll = sqlite.transaction((rows: readonly StagedVoter[]) => {
      for (const r of rows) {
        for (let i = 0; i < stagedColumns.length; i++) values[i] = r[stagedColumns[i]!];
        insert.run(values);
      }
    });
  }

  stage(rows: readonly StagedVoter[]): void {
    this.stageAll!(rows);
  }

  /** A statement's rows when it reads, none after running it when it writes. */
  statement(text: string): Array<Record<string, unknown>> {
    const statement = this.sqlite.prepare(text);
    if (statement.reader) return statement.all() as Array<Record<string, unknown>>;
    statement.run();
    return [];
  }

  exec(text: string): void {
    this.sqlite.exec(text);
  }

  /** The single value a statement reads (a count). */
  value(text: string): number {
    return this.sqlite.prepare(text).pluck().get() as number;
  }

  /**
   * The connection set for applying (bulkSettings) and the chunk's statements prepared: the staged rows of lines
   * [from, to) into the voters, in one transaction (applyChunk).
   */
  beginApply(seen: StagedSeen, now: string, large: boolean): void {
    const { sqlite, table, ws } = this;
    this.restore = bulkSettings(sqlite, large);
    // Ids only grow (AUTOINCREMENT), and nothing else writes during a chunk's transaction: the rows above the
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
    this.chunk = sqlite.transaction((from: number, to: number) => {
      const before = (maxId.get() as number | null) ?? 0;
      roll?.run(now, from, to, from, to);
      upsert.run(this.workspaceId, now, now, from, to);
      for (const statement of side) statement.run(from, to);
      return createdSince.get(before) as number;
    });
  }

  /** The voters created by the lines [from, to), and how long it took. */
  applyChunk(from: number, to: number): { result: number; ms: number } {
    return timed(() => this.chunk!(from, to));
  }

  /** The connection's settings as they were before beginApply. */
  endApply(): void {
    this.restore?.();
    this.restore = undefined;
  }

  /** The indexes of a table (ANALYZE takes them one at a time: voter-imports.sqlite.ts). */
  indexes(table: string): string[] {
    return this.sqlite.prepare(`SELECT name FROM pragma_index_list(?)`).pluck().all(table) as string[];
  }

  /** Statistics taken, without sampled keys (db/sqlite-statistics.ts). */
  analyze(analysis: string): void {
    analyze(this.sqlite, analysis);
  }

  dropSamples(): void {
    dropSamples(this.sqlite);
  }

  /** Drops the staging table (also once the rows are applied). */
  drop(): void {
    this.sqlite.exec(`DROP TABLE IF EXISTS ${this.table}`);
  }
}

/**
 * The connection's settings for an import's chunks, and a function that puts them back. Measured at a million
 * voters (docs/performance.md, 28 November, evening), the import spent most of its time in the trigram search
 * index (voters_fts): each chunk's commit writes a small segment of it, and FTS5 merges those segments level
 * by level, deleting each merged segment's pages, which it reads back from the file (pages long gone from the
 * cache). So, for the apply only:
 * - a 32 MiB page cache (SQLITE_IMPORT_CACHE_KIB; the thread's connection starts with SQLite's 2 MiB): each row
 *   lands at scattered places of many b-trees;
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

/** What an import's thread is started with. */
export interface ImportThreadData {
  file: string;
  table: string;
  workspaceId: number;
}

/** A call of an ImportStatements method, posted to the import's thread; `method: null` ends the thread. */
export interface ImportCall {
  id: number;
  method: keyof ImportStatements | null;
  args: unknown[];
}

/** The answer to a call: its result, or the error it threw (its name, message and SQLite code). */
export interface ImportAnswer {
  id: number;
  result?: unknown;
  error?: { name: string; message: string; code?: string };
}

/**
 * An import's thread (lib/threads.ts): its own connection to the database file, with the settings the app's
 * connection has (db/connect.ts: WAL is the file's own), running the calls it is posted one at a time.
 */
export function runImportThread(data: ImportThreadData, port: MessagePort): void {
  const sqlite = new SQLite(data.file);
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma(`busy_timeout = ${THREAD_BUSY_TIMEOUT_MS}`);
  const statements = new ImportStatements(sqlite, data.table, data.workspaceId);
  port.on('message', (call: ImportCall) => {
    if (call.method === null) {
      sqlite.close();
      port.close();
      return;
    }
    const answer: ImportAnswer = { id: call.id };
    try {
      answer.result = (statements[call.method] as (...args: unknown[]) => unknown).apply(
        statements,
        call.args,
      );
    } catch (error) {
      const { name, message, code } = error as { name: string; message: string; code?: string };
      answer.error = { name, message, code };
    }
    port.postMessage(answer);
  });
}
