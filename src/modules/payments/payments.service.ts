import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import type { Database, PaymentRow } from '../../db/schema.ts';
import { notFound, validationError } from '../../errors.ts';
import { pageResult } from '../../domain.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import { addCredits, balances } from '../credits/credits.repository.ts';
import { creditsView } from '../credits/credits.schemas.ts';
import { emitEvent } from '../webhooks/webhooks.events.ts';
import { findPayment, insertPayment, listPayments } from './payments.repository.ts';

export function paymentView(row: PaymentRow) {
  return {
    id: row.id,
    status: row.status,
    gateway: row.gateway,
    // No payment provider is built: a payment records credits and charges nothing.
    charged: false as const,
    sms_credits: Number(row.sms_credits),
    whatsapp_credits: Number(row.whatsapp_credits),
    email_credits: Number(row.email_credits),
    created_at: row.created_at,
    completed_at: row.completed_at,
  };
}

export interface PaymentInput {
  sms_credits?: number | undefined;
  whatsapp_credits?: number | undefined;
  email_credits?: number | undefined;
}

export class PaymentsService {
  constructor(private readonly deps: { db: Kysely<Database> }) {}

  /**
   * The sandbox gateway completes a payment at once: in one transaction the payment is recorded, the
   * credits are added through the ledger (`purchase`, reference `payment:<id>`) and `payment.processed`
   * is emitted with the payment and the new balance.
   */
  async create(workspaceId: number, userId: number, input: PaymentInput, actor: AuditActor) {
    const amounts = {
      sms: input.sms_credits ?? 0,
      whatsapp: input.whatsapp_credits ?? 0,
      email: input.email_credits ?? 0,
    };
    if (amounts.sms + amounts.whatsapp + amounts.email === 0) {
      const message = 'at least one of sms_credits, whatsapp_credits, email_credits must be positive.';
      throw validationError({
        sms_credits: [message],
        whatsapp_credits: [message],
        email_credits: [message],
      });
    }
    return this.deps.db.transaction().execute(async (trx) => {
      const now = nowIso();
      const row = await insertPayment(trx, {
        workspace_id: workspaceId,
        status: 'completed',
        gateway: 'sandbox',
        sms_credits: amounts.sms,
        whatsapp_credits: amounts.whatsapp,
        email_credits: amounts.email,
        created_by: userId,
        created_at: now,
        completed_at: now,
      });
      await addCredits(trx, workspaceId, amounts, 'purchase', `payment:${row.id}`, now);
      const result = { payment: paymentView(row), credits: creditsView(await balances(trx, workspaceId)) };
      await emitEvent(trx, workspaceId, 'payment.processed', result, now);
      const target = { type: 'payment', id: row.id };
      await recordAudit(trx, { workspaceId, actor, action: 'payment.created', target, details: amounts });
      return result;
    });
  }

  async get(workspaceId: number, id: number) {
    const row = await findPayment(this.deps.db, workspaceId, id);
    if (!row) throw notFound('Payment');
    return paymentView(row);
  }

  async list(workspaceId: number, page: number, perPage: number) {
    const { rows, total } = await listPayments(this.deps.db, workspaceId, page, perPage);
    return pageResult(rows.map(paymentView), total, page, perPage);
  }
}
