import { pageOf } from '../../db/paginate.ts';
import { type Selectable, sql } from 'kysely';
import { type CreditLedgerTable } from '../../db/schema.ts';
import { type CreditChannel, creditChannels, type LedgerKind } from '../../domain.ts';
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

/**
 * Takes `amount` credits of one channel for a send, in the caller's transaction: a single conditional UPDATE
 * (`balance >= amount`), so concurrent sends can never take the balance below zero. Returns false, writing
 * nothing, when the balance is short.
 */
export async function reserveCredits(
  trx: Executor,
  workspaceId: number,
  channel: CreditChannel,
  amount: number,
  reference: string,
  now: string,
): Promise<boolean> {
  if (amount <= 0) return true;
  const result = await trx
    .updateTable('credit_balances')
    .set({ balance: sql`balance - ${amount}` })
    .where('workspace_id', '=', workspaceId)
    .where('channel', '=', channel)
    .where('balance', '>=', amount)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) !== 1) return false;
  await trx
    .insertInto('credit_ledger')
    .values({
      workspace_id: workspaceId,
      channel,
      kind: 'reserve',
      amount: -amount,
      reference,
      created_at: now,
    })
    .execute();
  return true;
}

/** Gives back credits of messages that failed or were cancelled, with one ledger entry. */
/**
 * Records that reserved credits became a charge (the message was delivered). The balance does not move:
 * the reserve already took the credits; a capture's `amount` is how many it made final, so the balance is
 * the sum of every entry's amount but the captures'.
 */
export async function captureCredits(
  trx: Executor,
  workspaceId: number,
  channel: CreditChannel,
  amount: number,
  reference: string,
  now: string,
): Promise<void> {
  if (amount <= 0) return;
  await trx
    .insertInto('credit_ledger')
    .values({ workspace_id: workspaceId, channel, kind: 'capture', amount, reference, created_at: now })
    .execute();
}

export async function refundCredits(
  trx: Executor,
  workspaceId: number,
  channel: CreditChannel,
  amount: number,
  reference: string,
  now: string,
): Promise<void> {
  if (amount <= 0) return;
  await trx
    .updateTable('credit_balances')
    .set({ balance: sql`balance + ${amount}` })
    .where('workspace_id', '=', workspaceId)
    .where('channel', '=', channel)
    .execute();
  await trx
    .insertInto('credit_ledger')
    .values({ workspace_id: workspaceId, channel, kind: 'refund', amount, reference, created_at: now })
    .execute();
}

/**
 * A workspace's ledger entries that moved its balance, newest first: every kind but `capture` (a capture only
 * records that reserved credits became final; the balance moved at the reserve).
 */
export async function listLedger(
  db: Executor,
  workspaceId: number,
  channel: CreditChannel | undefined,
  page: number,
  perPage: number,
): Promise<{ rows: Selectable<CreditLedgerTable>[]; total: number }> {
  let query = db
    .selectFrom('credit_ledger')
    .where('workspace_id', '=', workspaceId)
    .where('kind', '!=', 'capture');
  if (channel) query = query.where('channel', '=', channel);
  return pageOf(query, (q) => q.selectAll().orderBy('id', 'desc'), page, perPage);
}
