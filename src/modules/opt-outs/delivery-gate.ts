import type { Kysely } from 'kysely';
import type { Database, MessageChannel, MessageErrorCode, MessageRow } from '../../db/schema.ts';
import { type QuietHours, quietUntil } from '../../lib/quiet-hours.ts';
import { emitMessageEvents, refund } from '../messages/messages.service.ts';
import {
  phonesInConstituencies,
  silencedConstituencies,
} from '../silence-periods/silence-periods.repository.ts';
import { failQueuedWithCode, holdUntil } from './consent-outbox.repository.ts';
import { optedOutAddresses } from './opt-outs.repository.ts';

/** Channels whose bulk messages quiet hours and silence periods apply to (not email). */
const RULED_CHANNELS: ReadonlySet<MessageChannel> = new Set(['sms', 'whatsapp', 'ivr']);

export interface Screening {
  /** What may go to the provider now. */
  send: MessageRow[];
  optedOut: number[];
  silenced: number[];
  held: number[];
}

/** Decides, per message, what the consent rules say; the caller (or `screen`) acts on it. */
export interface GateRules {
  quietHours: QuietHours | undefined;
  /** Templates whose category is service or transactional are not held by quiet hours (by template id). */
  exempt?: (row: MessageRow) => boolean;
}

/**
 * The consent rules at send time, on a batch the delivery worker claimed: an opted-out address fails with
 * `opted_out` (any message), a bulk message (broadcast or campaign) on sms/whatsapp/ivr to a voter of a
 * constituency in a silence period fails with `silence_period`, and one inside quiet hours is held (stays
 * queued) until the window ends. Failed messages are refunded with their message.failed events. Checked per
 * batch, so an opt-out that arrives while a broadcast drains stops the rest of it.
 */
export class DeliveryGate {
  constructor(private readonly deps: { db: Kysely<Database>; rules: GateRules }) {}

  async decide(rows: readonly MessageRow[], at: Date): Promise<Screening & { holdUntil: Date | undefined }> {
    const { db, rules } = this.deps;
    const result: Screening & { holdUntil: Date | undefined } = {
      send: [],
      optedOut: [],
      silenced: [],
      held: [],
      holdUntil: quietUntil(rules.quietHours, at),
    };
    const byWorkspace = new Map<number, MessageRow[]>();
    for (const row of rows)
      byWorkspace.set(row.workspace_id, [...(byWorkspace.get(row.workspace_id) ?? []), row]);
    const iso = at.toISOString();
    for (const [workspaceId, group] of byWorkspace) {
      const stopped = new Map<MessageChannel, Set<string>>();
      for (const channel of new Set(group.map((r) => r.channel))) {
        const addresses = group.filter((r) => r.channel === channel).map((r) => r.to);
        stopped.set(channel, await optedOutAddresses(db, workspaceId, channel, addresses));
      }
      const bulk = group.filter((r) => r.campaign_id !== null && RULED_CHANNELS.has(r.channel));
      let silenced = new Set<string>();
      if (bulk.length > 0) {
        const keys = await silencedConstituencies(db, workspaceId, iso);
        if (keys.length > 0) {
          silenced = await phonesInConstituencies(
            db,
            workspaceId,
            bulk.map((r) => r.to),
            keys,
          );
        }
      }
      for (const row of group) {
        const isBulk = row.campaign_id !== null && RULED_CHANNELS.has(row.channel);
        if (stopped.get(row.channel)?.has(row.to)) result.optedOut.push(row.id);
        else if (isBulk && silenced.has(row.to)) result.silenced.push(row.id);
        else if (isBulk && result.holdUntil && !(rules.exempt?.(row) ?? false)) result.held.push(row.id);
        else result.send.push(row);
      }
    }
    return result;
  }

  /** Applies the rules to a claimed batch and returns what may be sent now. */
  async screen(rows: MessageRow[], at: Date, workerId: string): Promise<MessageRow[]> {
    if (rows.length === 0) return rows;
    const decision = await this.decide(rows, at);
    const now = new Date().toISOString();
    await this.fail(decision.optedOut, 'opted_out', 'The recipient has opted out of this channel.', now);
    await this.fail(
      decision.silenced,
      'silence_period',
      "The recipient's constituency is in a silence period.",
      now,
    );
    if (decision.held.length > 0 && decision.holdUntil) {
      await holdUntil(this.deps.db, decision.held, workerId, decision.holdUntil.toISOString(), now);
    }
    return decision.send;
  }

  private async fail(ids: number[], code: MessageErrorCode, reason: string, now: string): Promise<void> {
    if (ids.length === 0) return;
    await this.deps.db.transaction().execute(async (trx) => {
      const moved = await failQueuedWithCode(trx, ids, code, reason, now);
      await refund(trx, moved, now);
      await emitMessageEvents(trx, moved, 'message.failed', now);
    });
  }
}
