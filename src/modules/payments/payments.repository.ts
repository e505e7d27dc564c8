import type { Insertable } from 'kysely';
import type { PaymentRow, PaymentTable } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { workspacePage } from '../../db/paginate.ts';

export async function insertPayment(db: Executor, values: Insertable<PaymentTable>): Promise<PaymentRow> {
  return db.insertInto('payments').values(values).returningAll().executeTakeFirstOrThrow();
}

/** Newest first. */
export function listPayments(db: Executor, workspaceId: number, page: number, perPage: number) {
  return workspacePage(db, 'payments', workspaceId, page, perPage, 'desc');
}

export async function findPayment(
  db: Executor,
  workspaceId: number,
  id: number,
): Promise<PaymentRow | undefined> {
  return db
    .selectFrom('payments')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}
