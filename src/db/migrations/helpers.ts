import { type CreateTableBuilder, type Kysely, PostgresAdapter } from 'kysely';

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
