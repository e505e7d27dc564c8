import { type Selectable, sql } from 'kysely';
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
  const workspace = sql<boolean>`${sql.ref('workspace_id')} = ${workspaceId}`;
  const [rows, count] = await Promise.all([
    db
      .selectFrom(table as WorkspaceListTable)
      .selectAll()
      .where(workspace)
      .orderBy(sql.ref('id'), order)
      .limit(perPage)
      .offset((page - 1) * perPage)
      .execute(),
    db
      .selectFrom(table as WorkspaceListTable)
      .select((eb) => eb.fn.countAll<number>().as('total'))
      .where(workspace)
      .executeTakeFirstOrThrow(),
  ]);
  return { rows: rows as Selectable<Database[T]>[], total: Number(count.total) };
}
