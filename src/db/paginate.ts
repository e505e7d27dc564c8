import { type Selectable, type SelectQueryBuilder, sql } from 'kysely';
import type { Database } from './schema.ts';
import type { Executor } from './types.ts';

/** The tables listed a page at a time with nothing but their workspace to filter on. */
type WorkspaceListTable = 'users' | 'segments' | 'webhooks' | 'campaigns' | 'payments';

/**
 * One page of a workspace's rows of `table`, ordered by id (`desc`: newest first), and how many rows the
 * workspace has in all.
 */
export async function workspacePage<T extends WorkspaceListTable>(
  db: Executor,
  table: T,
  workspaceId: number,
  page: number,
  perPage: number,
  order: 'asc' | 'desc' = 'asc',
): Promise<{ rows: Selectable<Database[T]>[]; total: number }> {
  const { rows, total } = await pageOf(
    db
      .selectFrom(table as WorkspaceListTable)
      .where(sql<boolean>`${sql.ref('workspace_id')} = ${workspaceId}`),
    (q) => q.selectAll().orderBy(sql.ref('id'), order),
    page,
    perPage,
  );
  return { rows: rows as Selectable<Database[T]>[], total };
}

/**
 * One page of a filtered query and how many rows it matches in all: `rows` adds the columns and the order to
 * `filtered` (which selects nothing yet); the count runs on `filtered` alone, beside the page.
 */
export async function pageOf<DB, TB extends keyof DB, F, O>(
  filtered: SelectQueryBuilder<DB, TB, F>,
  rows: (query: SelectQueryBuilder<DB, TB, F>) => SelectQueryBuilder<DB, TB, O>,
  page: number,
  perPage: number,
): Promise<{ rows: O[]; total: number }> {
  const [found, count] = await Promise.all([
    rows(filtered)
      .limit(perPage)
      .offset((page - 1) * perPage)
      .execute(),
    filtered.select(sql<number>`count(*)`.as('total')).executeTakeFirstOrThrow(),
  ]);
  return { rows: found as O[], total: Number((count as { total: number }).total) };
}
