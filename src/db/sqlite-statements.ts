import type SQLite from 'better-sqlite3';
import type { SqliteDatabase, SqliteStatement } from 'kysely';

/** Distinct SQL texts kept prepared (least recently used first out). */
export const STATEMENT_CACHE_SIZE = 500;
/**
 * Longer texts are prepared each time and not kept: multi-row inserts and long `in (...)` lists are many
 * distinct texts, each used once, and a prepared statement holds memory for as long as it is kept.
 */
const MAX_CACHED_SQL_LENGTH = 4096;

/**
 * The database as Kysely's SqliteDialect sees it, with a bounded cache of prepared statements by SQL text.
 * Kysely's driver calls `prepare` for every query, and better-sqlite3 compiles the statement anew each time:
 * on a primary-key read that was most of the database's share of the request. Kysely renders the same query
 * shape to the same text with `?` parameters, so the texts repeat and each is compiled once.
 *
 * Only Kysely's queries go through this cache; the bulk paths that use the raw database (`Db.raw.sqlite`)
 * prepare their own statements and may set modes on them (`raw`, `pluck`) without touching these. A cached
 * statement is used by one query at a time: Kysely's connection lock serialises queries (and better-sqlite3
 * runs nothing else on a connection while a streamed query iterates); should a `busy` statement be asked for
 * all the same, a fresh one is prepared instead.
 * SQLite re-prepares a statement itself after a schema change.
 */
export function withStatementCache(
  sqlite: SQLite.Database,
  size = STATEMENT_CACHE_SIZE,
): SqliteDatabase & { readonly cached: number } {
  const statements = new Map<string, SQLite.Statement>();
  return {
    prepare(sql: string): SqliteStatement {
      const hit = statements.get(sql);
      if (hit && !hit.busy) {
        // Map keeps insertion order: moving the hit to the end makes the first entry the least recently used.
        statements.delete(sql);
        statements.set(sql, hit);
        return hit;
      }
      const statement = sqlite.prepare(sql);
      if (!hit && sql.length <= MAX_CACHED_SQL_LENGTH) {
        statements.set(sql, statement);
        if (statements.size > size) statements.delete(statements.keys().next().value as string);
      }
      return statement;
    },
    close() {
      statements.clear();
      sqlite.close();
    },
    get cached() {
      return statements.size;
    },
  };
}
