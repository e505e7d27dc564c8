import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { type DatabaseSettings, databaseSettings } from '../config.ts';
import { FairGate } from '../lib/fair-gate.ts';
import { within } from '../lib/time-limit.ts';
import type { Database } from './schema.ts';
import { analyze } from './sqlite-statistics.ts';
import { withStatementCache } from './sqlite-statements.ts';
import { TurnTakingSqliteDialect, WriteTurns } from './sqlite-turns.ts';

export type DialectName = 'sqlite' | 'postgres';

/** A bulk-pool connection for one workspace (Db.raw.bulkFor: shared fairly between workspaces). */
export type BulkConnections = (workspaceId: number) => Promise<pg.PoolClient>;

export interface Db {
  readonly kysely: Kysely<Database>;
  readonly dialect: DialectName;
  /**
   * The driver beneath Kysely, for the few bulk paths that need it (voter import and export): COPY on
   * PostgreSQL, prepared statements in large synchronous transactions on SQLite. On SQLite, use it only
   * inside `kysely.connection().execute(...)` so that Kysely's connection lock keeps other requests' queries
   * and transactions out, and never hold it across an await.
   *
   * PostgreSQL's `bulk` is a small pool of its own (DB_BULK_POOL_SIZE) for imports and exports: they hold a
   * connection for as long as a file takes, which must never starve the pool the API answers from. Its
   * statements have no statement timeout (a million-row upsert takes minutes); an export ends when it makes
   * no progress for EXPORT_IDLE_TIMEOUT_MS instead.
   */
  readonly raw:
    | {
        readonly dialect: 'sqlite';
        readonly sqlite: SQLite.Database;
        /** The app's writes and a voter import thread's, taking turns (sqlite-turns.ts). */
        readonly turns: WriteTurns;
        /**
         * The voter imports' threads (each with its own connection and page cache), shared as PostgreSQL's
         * bulk connections are: at most DB_BULK_POOL_SIZE at once, DB_BULK_PER_WORKSPACE of one workspace,
         * the others queued by workspace in turn for up to DB_BULK_QUEUE_TIMEOUT_MS (then 503).
         */
        readonly importThreads: FairGate;
      }
    | {
        readonly dialect: 'postgres';
        readonly pool: pg.Pool;
        readonly bulk: pg.Pool;
        /**
         * A connection of `bulk` for one workspace's import or export, shared fairly (FairGate): at most
         * DB_BULK_PER_WORKSPACE per workspace, the others queued by workspace in turn for up to
         * DB_BULK_QUEUE_TIMEOUT_MS (then 503). Releasing the client gives the slot back.
         */
        readonly bulkFor: BulkConnections;
      };
  /**
   * Cheap round trip used by the health check; throws when the database cannot be reached or has not
   * answered within `timeoutMs`.
   */
  ping(timeoutMs?: number): Promise<void>;
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

/** How long after the server's statement_timeout the client gives up on an answer that never comes. */
const READ_TIMEOUT_MARGIN_MS = 1000;
/** The health check's answer comes within this (or the acquire timeout, if shorter). */
const PING_TIMEOUT_MS = 2000;

/**
 * A pg client that is closed when a query's answer did not come in time (the server or the network hangs):
 * otherwise it would go back to the pool with the query still outstanding and fail whoever takes it next.
 * Closing it makes it unusable, so the pool drops it on release.
 */
class Client extends pg.Client {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  override query(...args: any[]): any {
    const onError = (error: unknown) => {
      if ((error as Error | undefined)?.message === 'Query read timeout') {
        (this as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
      }
    };
    const last = args.length - 1;
    if (typeof args[last] === 'function') {
      const callback = args[last] as (error: unknown, result: unknown) => void;
      args[last] = (error: unknown, result: unknown) => {
        if (error) onError(error);
        callback(error, result);
      };
    }
    const result = (super.query as (...a: unknown[]) => unknown)(...args);
    if (result instanceof Promise)
      return result.catch((error: unknown) => (onError(error), Promise.reject(error)));
    return result;
  }
}

function pgPool(databaseUrl: string, options: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    types: pgTypes,
    Client,
    keepAlive: true,
    ...options,
  });
  // A client's error (the server went away, the connection was reset) must not crash the process, whether
  // it sits idle in the pool or is checked out by a request: the request's query fails with it (503) and
  // the pool drops the client when it is released.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}

/**
 * The database of DATABASE_URL. Every PostgreSQL call of the API is bounded: the wait for a pooled
 * connection (a new one's handshake included) by `acquireTimeoutMs`, a statement by the server's
 * statement_timeout and, should the server not answer at all, by a client-side read timeout a second later.
 * A SQLite file locked by another process is waited for at most a second (better-sqlite3 waits blocking the
 * whole process), then the request fails with SQLITE_BUSY. Either way the API answers 503.
 */
export function connect(databaseUrl: string, settings: DatabaseSettings = databaseSettings({})): Db {
  return databaseUrl.startsWith('postgres://') || databaseUrl.startsWith('postgresql://')
    ? connectPostgres(databaseUrl, settings)
    : connectSqlite(databaseUrl, settings);
}

/** PostgreSQL: the API's pool, and a pool of its own for imports and exports, shared fairly between workspaces. */
function connectPostgres(databaseUrl: string, settings: DatabaseSettings): Db {
  const timeouts = { connectionTimeoutMillis: settings.acquireTimeoutMs };
  const pool = pgPool(databaseUrl, {
    ...timeouts,
    max: 10,
    statement_timeout: settings.statementTimeoutMs,
    query_timeout: settings.statementTimeoutMs + READ_TIMEOUT_MARGIN_MS,
  });
  const bulk = pgPool(databaseUrl, { ...timeouts, max: settings.bulkPoolSize });
  const gate = new FairGate(
    settings.bulkPoolSize,
    settings.bulkPerWorkspace,
    settings.bulkQueueTimeoutMs,
    'The connections for imports and exports (DB_BULK_POOL_SIZE)',
  );
  const bulkFor: BulkConnections = async (workspaceId) => {
    const leave = await gate.acquire(workspaceId);
    let client: pg.PoolClient;
    try {
      client = await bulk.connect();
    } catch (error) {
      leave();
      throw error;
    }
    const release = client.release.bind(client);
    client.release = (error?: Error | boolean) => {
      leave();
      release(error);
    };
    return client;
  };
  const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  const pingWithin = Math.min(PING_TIMEOUT_MS, settings.acquireTimeoutMs);
  return {
    kysely,
    dialect: 'postgres',
    raw: { dialect: 'postgres', pool, bulk, bulkFor },
    ping: async (timeoutMs = pingWithin) => {
      await within(sql`select 1`.execute(kysely), timeoutMs, () => {
        throw Object.assign(new Error('the database health check timed out'), { code: 'ETIMEDOUT' });
      });
    },
    close: async () => {
      await Promise.all([kysely.destroy(), bulk.end()]);
      // Kysely ends the pool only if it ever ran a query through it: a Db closed unused would keep it.
      if (!pool.ending) await pool.end();
    },
  };
}

/** SQLite: one connection, in WAL mode, with a page cache sized for copying a segment into the outbox. */
function connectSqlite(databaseUrl: string, settings: DatabaseSettings): Db {
  const path = databaseUrl.slice('sqlite:'.length) || ':memory:';
  if (path !== ':memory:') keepPrivate(path);
  const sqlite = new SQLite(path);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma(`busy_timeout = ${Math.min(1000, settings.statementTimeoutMs)}`);
  // Refresh statistics gone stale since the last run, as SQLite recommends for long-lived connections. (Full
  // statistics: the sampled ones of analysis_limit misled the planner into walking the id index.)
  analyze(sqlite, 'PRAGMA optimize = 0x10002');
  // A 32 MiB page cache (SQLite's default is 2 MiB): a segment of a million voters is copied into the outbox
  // without re-reading its pages. Temporary storage stays on disk (the default): a voter import stages the
  // whole file in a TEMP table, which in memory would grow with the file (`temp_store = MEMORY` took a
  // million-row import to 467 MB), and the setting cannot be switched per statement because changing it
  // drops every temporary table of the connection.
  sqlite.pragma('cache_size = -32768');
  const turns = new WriteTurns();
  const kysely = new Kysely<Database>({
    dialect: new TurnTakingSqliteDialect({ database: withStatementCache(sqlite) }, turns),
  });
  return {
    kysely,
    dialect: 'sqlite',
    raw: {
      dialect: 'sqlite',
      sqlite,
      turns,
      importThreads: new FairGate(
        settings.bulkPoolSize,
        settings.bulkPerWorkspace,
        settings.bulkQueueTimeoutMs,
        'The threads for voter imports (DB_BULK_POOL_SIZE)',
      ),
    },
    ping: async () => {
      if (!sqlite.open) throw new Error('database connection is closed');
      sqlite.prepare('select 1').get();
    },
    close: () => kysely.destroy(),
  };
}

/**
 * The SQLite database holds voters' personal data: its file is readable by the service's user alone (0600),
 * whatever the umask, created so before SQLite opens it and set so on every start for an older file. SQLite
 * creates the WAL and shared-memory files with the database file's permissions; those already there are set
 * too. A new folder for it is 0700.
 */
function keepPrivate(path: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  closeSync(openSync(path, 'a', 0o600));
  for (const file of [path, `${path}-wal`, `${path}-shm`]) {
    try {
      chmodSync(file, 0o600);
    } catch (error) {
      if ((error as { code?: string }).code !== 'ENOENT') throw error;
    }
  }
}

export function nowIso(): string {
  return new Date().toISOString();
}
