import { type Kysely, PostgresAdapter } from 'kysely';

/** Which SQL dialect a Kysely instance (or transaction) speaks; for the repositories' few dialect branches. */
export function isPostgres(db: Kysely<unknown> | { getExecutor(): { adapter: unknown } }): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}
