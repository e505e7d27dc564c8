import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import type { Database, MessageRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import type { MessageChannel, MessageErrorCode } from '../../domain.ts';
import { type Channel, channels, type FinalStatus, type StatusReport } from '../../providers/provider.ts';
import { simulatedAdapters } from '../../providers/registry.ts';
import { noteCampaignError } from '../campaigns/campaigns.repository.ts';
import { captureCredits, refundCredits } from '../credits/credits.repository.ts';
import { creditChannel } from '../messages/messages.rules.ts';
import { emitEvents } from '../webhooks/webhooks.events.ts';
import {
  deliverMessages,
  dueSettlements,
  failMessages,
  type Handover,
  markSent,
  type Settled,
} from './outbox.repository.ts';
import { accountRef, campaignRef, messageRef } from '../../refs.ts';

/**
 * A message's life after it is queued, for single sends, the delivery worker and providers' callbacks alike:
 * handed over (sent), delivered, failed. Every transition is conditional in SQL, so a late or repeated report
 * never moves a message back, and each one settles the credits (a failure refunds, a delivery captures) and
 * emits its webhook events in the same transaction.
 */
export class MessageLifecycle {
  constructor(private readonly db: Kysely<Database>) {}

  /** queued -> sent for what providers accepted. */
  async handedOver(handovers: Handover[]): Promise<void> {
    await markSent(this.db, handovers, nowIso());
  }

  /** queued | sent -> failed, refunding exactly the rows that moved, in one transaction. */
  async fail(ids: number[], reason: string, code: MessageErrorCode): Promise<Settled[]> {
    if (ids.length === 0) return [];
    return this.db.transaction().execute(async (trx) => {
      const now = nowIso();
      const moved = await failMessages(trx, ids, reason, code, now);
      await refund(trx, moved, now);
      // A campaign shows its latest failure (a cancellation is not one).
      if (code !== 'cancelled')
        await noteCampaignError(
          trx,
          moved.flatMap((m) => (m.campaign_id !== null ? [Number(m.campaign_id)] : [])),
          code,
          reason,
          now,
        );
      await emitMessageEvents(trx, moved, 'message.failed', now);
      return moved;
    });
  }

  /** sent -> delivered, with the message.delivered events, in one transaction. */
  async deliver(ids: number[]): Promise<Settled[]> {
    if (ids.length === 0) return [];
    return this.db.transaction().execute(async (trx) => {
      const now = nowIso();
      const moved = await deliverMessages(trx, ids, now);
      await capture(trx, moved, now);
      await emitMessageEvents(trx, moved, 'message.delivered', now);
      return moved;
    });
  }

  /** Delivery reports (callbacks, sandbox settlement). Late or repeated reports change nothing. */
  async applyReports(reports: StatusReport[]): Promise<void> {
    const byStatus: Record<FinalStatus, number[]> = { delivered: [], failed: [] };
    for (const r of reports) byStatus[r.status].push(r.messageId);
    if (byStatus.delivered.length > 0) await this.deliver(byStatus.delivered);
    const failed = reports.filter((r) => r.status === 'failed');
    const groups = new Map<string, { reason: string; code: MessageErrorCode; ids: number[] }>();
    for (const r of failed) {
      const reason = r.error ?? 'The provider reported the message as not delivered.';
      const code = r.errorCode ?? 'undeliverable';
      const key = `${code}:${reason}`;
      const group = groups.get(key) ?? { reason, code, ids: [] };
      group.ids.push(r.messageId);
      groups.set(key, group);
    }
    for (const { reason, code, ids } of groups.values()) await this.fail(ids, reason, code);
  }
}

/** Messages that failed before error codes existed (migration 009) get one from their reason. */
function legacyErrorCode(error: string | null): MessageErrorCode {
  if (error === 'cancelled' || error === 'insufficient credits') return 'cancelled';
  if (error?.startsWith('The sandbox provider fails')) return 'undeliverable';
  return 'provider_rejected';
}

/** A message as the API shows it (history, and the message.* events). */
export function historyItem(row: MessageRow) {
  return {
    id: messageRef(row.id),
    channel: row.channel,
    to: row.to,
    message: row.body,
    status: row.status,
    error_code: row.status === 'failed' ? (row.error_code ?? legacyErrorCode(row.error)) : null,
    // A failure's reason; on a sent message, what the provider said short of a final word (no answer yet).
    error_message: row.status === 'failed' || row.status === 'sent' ? (row.error ?? null) : null,
    sent_at: row.sent_at,
    created_at: row.created_at,
    updated_at: row.updated_at,
    campaign_id: row.campaign_id !== null ? campaignRef(row.campaign_id) : null,
    channel_account_id: row.channel_account_id !== null ? accountRef(row.channel_account_id) : null,
    provider: row.provider,
    provider_message_id: row.provider_message_id,
  };
}

/** The message.delivered / message.failed webhook events of messages that just moved, as history shows them. */
export async function emitMessageEvents(
  trx: Executor,
  rows: Settled[],
  type: 'message.delivered' | 'message.failed',
  now: string,
): Promise<void> {
  const byWorkspace = new Map<number, Settled[]>();
  for (const row of rows)
    byWorkspace.set(row.workspace_id, [...(byWorkspace.get(row.workspace_id) ?? []), row]);
  for (const [workspaceId, moved] of byWorkspace) {
    await emitEvents(trx, workspaceId, type, moved.map(historyItem), now);
  }
}

type Charged = Pick<Settled, 'id' | 'workspace_id' | 'channel' | 'cost' | 'campaign_id'>;

/** Settled messages' credits grouped per workspace, channel and campaign (or per message outside campaigns). */
function ledgerGroups(rows: Charged[]) {
  const groups = new Map<
    string,
    { workspaceId: number; channel: MessageChannel; ref: string; amount: number }
  >();
  for (const row of rows) {
    if (row.cost <= 0) continue;
    const ref = row.campaign_id !== null ? campaignRef(row.campaign_id) : messageRef(row.id);
    const key = `${row.workspace_id}:${row.channel}:${ref}`;
    const group = groups.get(key) ?? { workspaceId: row.workspace_id, channel: row.channel, ref, amount: 0 };
    group.amount += row.cost;
    groups.set(key, group);
  }
  return groups.values();
}

/** Failed messages give their reserved credits back: one refund ledger entry per group. */
export async function refund(trx: Executor, rows: Charged[], now: string): Promise<void> {
  for (const g of ledgerGroups(rows)) {
    const credit = creditChannel(g.channel);
    if (credit) await refundCredits(trx, g.workspaceId, credit, g.amount, g.ref, now);
  }
}

/** Delivered messages keep their reserved credits for good: one capture ledger entry per group. */
export async function capture(trx: Executor, rows: Charged[], now: string): Promise<void> {
  for (const g of ledgerGroups(rows)) {
    const credit = creditChannel(g.channel);
    if (credit) await captureCredits(trx, g.workspaceId, credit, g.amount, g.ref, now);
  }
}

/**
 * Simulated providers (the sandbox) send no reports: their sent messages are delivered or failed by age, once
 * `afterMs` has passed since they were handed over, at most `batch` a channel at a time. Returns how many.
 */
export async function settleSimulated(
  db: Kysely<Database>,
  lifecycle: MessageLifecycle,
  rules: { afterMs: (channel: Channel) => number; batch: (channel: Channel) => number },
): Promise<number> {
  let settled = 0;
  for (const adapter of simulatedAdapters)
    for (const channel of channels) {
      // The deployment's provider, or channel accounts of it (whatever the deployment's provider is).
      const cutoff = new Date(Date.now() - rules.afterMs(channel)).toISOString();
      const due = await dueSettlements(db, channel, adapter.name, cutoff, rules.batch(channel));
      const reports: StatusReport[] = due.map((m) => {
        const status = adapter.simulated!.settles(m.to);
        return {
          messageId: m.id,
          status,
          error: status === 'failed' ? `The ${adapter.name} provider fails this recipient.` : undefined,
          errorCode: status === 'failed' ? ('undeliverable' as const) : undefined,
        };
      });
      await lifecycle.applyReports(reports);
      settled += due.length;
    }
  return settled;
}
