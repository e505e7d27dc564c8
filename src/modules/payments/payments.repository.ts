import type { Insertable } from 'kysely';
import type { PaymentRow, PaymentTable } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';

export async function insertPayment(db: Executor, values: Insertable<PaymentTable>): Promise<PaymentRow> {
  return db.insertInto('payments').values(values).returningAll().executeTakeFirstOrThrow();
}

/** Newest first. */
export async function listPayments(
  db: Executor,
  workspaceId: number,
  page: number,
  perPage: number,
): Promise<{ rows: PaymentRow[]; total: number }> {
  const [rows, count] = await Promise.all([
    db
      .selectFrom('payments')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .orderBy('id', 'desc')
      .limit(perPage)
      .offset((page - 1) * perPage)
      .execute(),
    db
      .selectFrom('payments')
      .select((eb) => eb.fn.countAll<number>().as('total'))
      .where('workspace_id', '=', workspaceId)
      .executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.total) };
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
