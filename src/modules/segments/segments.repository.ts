import type { Selectable } from 'kysely';
import type { SegmentTable } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { workspacePage } from '../../db/paginate.ts';

export type SegmentRow = Selectable<SegmentTable>;

export async function insertSegment(
  db: Executor,
  values: { workspace_id: number; name: string; filters: string; created_at: string; updated_at: string },
): Promise<SegmentRow> {
  return db.insertInto('segments').values(values).returningAll().executeTakeFirstOrThrow();
}

export async function findSegment(
  db: Executor,
  workspaceId: number,
  id: number,
): Promise<SegmentRow | undefined> {
  return db
    .selectFrom('segments')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export function listSegments(db: Executor, workspaceId: number, page: number, perPage: number) {
  return workspacePage(db, 'segments', workspaceId, page, perPage);
}

export async function deleteSegment(db: Executor, workspaceId: number, id: number): Promise<boolean> {
  const result = await db
    .deleteFrom('segments')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(result.numDeletedRows) === 1;
}

export async function updateSegment(
  db: Executor,
  workspaceId: number,
  id: number,
  values: { name?: string; filters?: string; updated_at: string },
): Promise<SegmentRow | undefined> {
  return db
    .updateTable('segments')
    .set(values)
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}
