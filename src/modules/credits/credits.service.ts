import type { Kysely, Selectable } from 'kysely';
import type { CreditLedgerTable, Database } from '../../db/schema.ts';
import type { CreditChannel } from '../../domain.ts';
import { pageResult } from '../../domain.ts';
import { listLedger } from './credits.repository.ts';
import type { LedgerReason } from './credits.schemas.ts';

const REF = /^(msg|camp)_(\d+)$/;
const PAYMENT = /^payment:(\d+)$/;

/** A ledger row as the API shows it: its reason, and the message, campaign or payment it belongs to. */
export function ledgerItem(row: Selectable<CreditLedgerTable>) {
  const reference = row.reference ?? '';
  const ref = REF.exec(reference);
  const payment = PAYMENT.exec(reference);
  let reason: LedgerReason;
  switch (row.kind) {
    case 'reserve':
    case 'capture':
      reason = 'charge';
      break;
    case 'refund':
      reason = 'refund';
      break;
    case 'purchase':
      reason = 'payment';
      break;
    case 'grant':
      reason = reference === 'signup' ? 'signup' : 'grant';
      break;
  }
  return {
    id: row.id,
    channel: row.channel,
    amount: Number(row.amount),
    reason,
    message_id: ref?.[1] === 'msg' ? reference : null,
    campaign_id: ref?.[1] === 'camp' ? reference : null,
    payment_id: payment ? Number(payment[1]) : null,
    created_at: row.created_at,
  };
}

/** Where a workspace's credits came from and went. */
export class CreditsService {
  constructor(private readonly deps: { db: Kysely<Database> }) {}

  async ledger(workspaceId: number, query: { page: number; per_page: number; channel?: CreditChannel }) {
    const { rows, total } = await listLedger(
      this.deps.db,
      workspaceId,
      query.channel,
      query.page,
      query.per_page,
    );
    return pageResult(rows.map(ledgerItem), total, query.page, query.per_page);
  }
}
