import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import type { Database } from './schema.ts';

export type DialectName = 'sqlite' | 'postgres';

export interface Db {
  readonly kysely: Kysely<Database>;
  readonly dialect: DialectName;
  /**
   * The driver beneath Kysely, for the few bulk paths that need it (voter import and export): COPY on
   * PostgreSQL, prepared statements in large synchronous transactions on SQLite. On SQLite, use it only
   * inside `kysely.connection().execute(...)` so that Kysely's connection lock keeps other requests' queries
   * and transactions out, and never hold it across an await.
   */
  readonly raw:
    | { readonly dialect: 'sqlite'; readonly sqlite: SQLite.Database }
    | { readonly dialect: 'postgres'; readonly pool: pg.Pool };
  /** Cheap round trip used by the health check; throws when the database cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

const PG_INT8 = 20;
const PG_TIMESTAMP = 1114;
const PG_TIMESTAMPTZ = 1184;

/** int8 as a JS number (ids and counts stay far below 2^53) and timestamps as ISO 8601 UTC strings. */
const pgTypes = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === PG_INT8) return (value: string) => Number(value);
    if (oid === PG_TIMESTAMPTZ || oid === PG_TIMESTAMP) {
      const parseDate = pg.types.getTypeParser(oid, 'text') as (value: string) => Date;
      return (value: string) => parseDate(value).toISOString();
    }
    return pg.types.getTypeParser(oid, format as 'text');
  },
} as unknown as pg.CustomTypesConfig;

export function connect(databaseUrl: string): Db {
  if (databaseUrl.startsWith('postgres://') || databaseUrl.startsWith('postgresql://')) {
    const pool = new pg.Pool({ connectionString: databaseUrl, types: pgTypes, max: 10 });
    // An idle client's error (the server went away) must not crash the process; the next query reports it.
    pool.on('error', () => {});
    const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    return {
      kysely,
      dialect: 'postgres',
      raw: { dialect: 'postgres', pool },
      ping: async () => {
        await sql`select 1`.execute(kysely);
      },
      close: () => kysely.destroy(),
    };
  }
  const path = databaseUrl.slice('sqlite:'.length) || ':memory:';
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const sqlite = new SQLite(path);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  // Refresh statistics gone stale since the last run, as SQLite recommends for long-lived connections. (Full
  // statistics: the sampled ones of analysis_limit misled the planner into walking the id index.)
  sqlite.pragma('optimize = 0x10002');
  // A 32 MiB page cache (SQLite's default is 2 MiB): a segment of a million voters is copied into the outbox
  // without re-reading its pages. Temporary storage stays on disk (the default): a voter import stages the
  // whole file in a TEMP table, which in memory would grow with the file (`temp_store = MEMORY` took a
  // million-row import to 467 MB), and the setting cannot be switched per statement because changing it
  // drops every temporary table of the connection.
  sqlite.pragma('cache_size = -32768');
  const kysely = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
  return {
    kysely,
    dialect: 'sqlite',
    raw: { dialect: 'sqlite', sqlite },
    ping: async () => {
      if (!sqlite.open) throw new Error('database connection is closed');
      sqlite.prepare('select 1').get();
    },
    close: () => kysely.destroy(),
  };
}

export function nowIso(): string {
  return new Date().toISOString();
}
