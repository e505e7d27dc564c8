import { type CreateTableBuilder, type Kysely, PostgresAdapter, sql } from 'kysely';

// Migrations import nothing from the application: these helpers are theirs alone.

export function isPostgres(db: Kysely<unknown>): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}

/** An auto-assigned integer primary key on either dialect. */
export function withId<T extends string>(db: Kysely<unknown>, table: CreateTableBuilder<T, never>) {
  return isPostgres(db)
    ? table.addColumn('id', 'bigint', (c) => c.primaryKey().generatedByDefaultAsIdentity())
    : table.addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement());
}

export function timestampType(db: Kysely<unknown>) {
  return isPostgres(db) ? ('timestamptz' as const) : ('text' as const);
}

export function bigintType(db: Kysely<unknown>) {
  return isPostgres(db) ? ('bigint' as const) : ('integer' as const);
}

/**
 * PostgreSQL: three statement-level triggers on `table` (`<table>_<name>_inserted`, `_deleted`, `_updated`), each a
 * function running the SQL `rows` gives for its transition tables: `rows('new_rows', '')` for inserted rows,
 * `rows('old_rows', '-')` for deleted ones, and for an update the SQL of both given to `update`.
 */
export async function transitionTriggers(
  db: Kysely<unknown>,
  table: string,
  name: string,
  rows: (transition: 'new_rows' | 'old_rows', sign: '' | '-') => string,
  update: (removed: string, added: string) => string,
): Promise<void> {
  const events = [
    ['inserted', 'INSERT', 'NEW TABLE AS new_rows', rows('new_rows', '')],
    ['deleted', 'DELETE', 'OLD TABLE AS old_rows', rows('old_rows', '-')],
    [
      'updated',
      'UPDATE',
      'OLD TABLE AS old_rows NEW TABLE AS new_rows',
      update(rows('old_rows', '-'), rows('new_rows', '')),
    ],
  ] as const;
  for (const [event, on, transition, body] of events) {
    const fn = `${table}_${name}_${event}`;
    await sql
      .raw(`CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN ${body} RETURN NULL; END $$`)
      .execute(db);
    await sql
      .raw(
        `CREATE TRIGGER ${fn} AFTER ${on} ON ${table} REFERENCING ${transition}
         FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
      )
      .execute(db);
  }
}

/** Drops what transitionTriggers made. */
export async function dropTransitionTriggers(
  db: Kysely<unknown>,
  table: string,
  name: string,
): Promise<void> {
  for (const event of ['inserted', 'deleted', 'updated']) {
    await sql.raw(`DROP TRIGGER ${table}_${name}_${event} ON ${table}`).execute(db);
    await sql.raw(`DROP FUNCTION ${table}_${name}_${event}()`).execute(db);
  }
}
