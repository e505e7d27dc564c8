import { sql } from 'kysely';
import { type CreditChannel, creditChannels, type LedgerKind } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';

export type CreditAmounts = Record<CreditChannel, number>;

export async function balances(db: Executor, workspaceId: number): Promise<CreditAmounts> {
  const rows = await db
    .selectFrom('credit_balances')
    .select(['channel', 'balance'])
    .where('workspace_id', '=', workspaceId)
    .execute();
  const out: CreditAmounts = { sms: 0, whatsapp: 0, email: 0 };
  for (const row of rows) out[row.channel] = Number(row.balance);
  return out;
}

/**
 * Adds credits (a grant or a purchase) and writes one ledger entry per channel, in the caller's transaction.
 * The balance row is created on first use; the addition is a single atomic UPDATE.
 */
export async function addCredits(
  trx: Executor,
  workspaceId: number,
  amounts: Partial<CreditAmounts>,
  kind: Extract<LedgerKind, 'grant' | 'purchase' | 'refund'>,
  reference: string | null,
  now: string,
): Promise<void> {
  for (const channel of creditChannels) {
    const amount = amounts[channel] ?? 0;
    await trx
      .insertInto('credit_balances')
      .values({ workspace_id: workspaceId, channel, balance: amount })
      .onConflict((oc) =>
        oc
          .columns(['workspace_id', 'channel'])
          .doUpdateSet({ balance: sql`credit_balances.balance + ${amount}` }),
      )
      .execute();
    if (amount !== 0) {
      await trx
        .insertInto('credit_ledger')
        .values({ workspace_id: workspaceId, channel, kind, amount, reference, created_at: now })
        .execute();
    }
  }
}
