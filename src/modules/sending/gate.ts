import type { Kysely } from 'kysely';
import type { Database, MessageRow, TemplateRow } from '../../db/schema.ts';
import type { MessageChannel, MessageErrorCode } from '../../domain.ts';
import { exemptFromQuietHours, type QuietHours, quietUntil, RULED_CHANNELS } from '../../lib/quiet-hours.ts';
import { renderTemplate } from './render.ts';
import type { OutgoingMessage } from '../../providers/provider.ts';
import { refundCredits, reserveCredits } from '../credits/credits.repository.ts';
import { creditChannel, unitCost } from '../messages/messages.rules.ts';
import { emitMessageEvents, refund } from './lifecycle.ts';
import { failMessages, releaseUnsent } from './outbox.repository.ts';
import { findTemplates, setRendered, votersByAddress } from '../templates/templates.repository.ts';
import { dltFields, providerTemplateOf } from '../templates/templates.service.ts';
import {
  phonesInConstituencies,
  silencedConstituencies,
} from '../silence-periods/silence-periods.repository.ts';
import {
  consentedAddresses,
  hasErasedAddresses,
  optedOutAddresses,
} from '../opt-outs/opt-outs.repository.ts';
import { erasedMark, isErasedMark } from '../opt-outs/opt-outs.rules.ts';
import { campaignRef, isTemplateRef, messageRef, templateNumber } from '../../refs.ts';

export interface Screening {
  /** What may go to the provider now. */
  send: MessageRow[];
  optedOut: number[];
  silenced: number[];
  held: number[];
  /** Bulk messages to an address of no voter whose consent is `given` (PRIVACY_REQUIRE_CONSENT). */
  noConsent: number[];
}

/** Decides, per message, what the consent rules say; the caller (or `screen`) acts on it. */
export interface GateRules {
  quietHours: QuietHours | undefined;
  /** APP_KEY: an erased person's opt-outs hold only a keyed hash of the address (`erasedMark`). */
  addressKey: Buffer;
  /** PRIVACY_REQUIRE_CONSENT: bulk messages only to voters whose consent is `given`. */
  requireConsent: boolean;
}

/** What a claimed batch may send now, and what each message's provider call adds (DLT fields). */
export interface Screened {
  rows: MessageRow[];
  extras: Map<number, Partial<OutgoingMessage>>;
}

/** Rows per workspace, in order. */
function byWorkspaceOf(rows: readonly MessageRow[]): Map<number, MessageRow[]> {
  const groups = new Map<number, MessageRow[]>();
  for (const row of rows) {
    const group = groups.get(row.workspace_id);
    if (group) group.push(row);
    else groups.set(row.workspace_id, [row]);
  }
  return groups;
}

/** A campaign's message, or a survey's question or call: bulk, on the channels the consent rules govern. */
const isBulk = (row: MessageRow) =>
  (row.campaign_id !== null || row.survey_response_id !== null) && RULED_CHANNELS.has(row.channel);

const templateId = (row: MessageRow) =>
  isTemplateRef(row.template_id) ? templateNumber(row.template_id) : undefined;

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
      noConsent: [],
      holdUntil: quietUntil(rules.quietHours, at),
    };
    const byWorkspace = byWorkspaceOf(rows);
    const iso = at.toISOString();
    for (const [workspaceId, group] of byWorkspace) {
      const templates = await this.templatesOf(workspaceId, group);
      // Service and transactional templates are not held by quiet hours.
      const exempt = (row: MessageRow) => exemptFromQuietHours(templates.get(templateId(row) ?? 0)?.category);
      const stopped = new Map<MessageChannel, Set<string>>();
      for (const channel of new Set(group.map((r) => r.channel))) {
        const addresses = group.filter((r) => r.channel === channel).map((r) => r.to);
        stopped.set(channel, await this.optedOut(workspaceId, channel, addresses));
      }
      const bulk = group.filter(isBulk);
      const consented =
        rules.requireConsent && bulk.length > 0
          ? await consentedAddresses(
              db,
              workspaceId,
              bulk.map((r) => r.to),
            )
          : undefined;
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
        const bulk = isBulk(row);
        if (stopped.get(row.channel)?.has(row.to)) result.optedOut.push(row.id);
        else if (bulk && consented && !consented.has(row.to)) result.noConsent.push(row.id);
        else if (bulk && silenced.has(row.to)) result.silenced.push(row.id);
        else if (bulk && result.holdUntil && !exempt(row)) result.held.push(row.id);
        else result.send.push(row);
      }
    }
    return result;
  }

  /**
   * Of `addresses`, those opted out of `channel`: in clear, or (an erased person's) as the keyed hash of the
   * address. A message whose address is itself a hash (the erasure rewrote it) matches that hash.
   */
  private async optedOut(workspaceId: number, channel: MessageChannel, addresses: string[]) {
    const key = this.deps.rules.addressKey;
    const marks = new Map<string, string>();
    // Hashing every address of a batch costs a drain some 7%: done only where someone was erased (few offices).
    if (await hasErasedAddresses(this.deps.db, workspaceId))
      for (const address of addresses)
        if (!isErasedMark(address)) marks.set(erasedMark(key, address), address);
    const found = await optedOutAddresses(this.deps.db, workspaceId, channel, [
      ...addresses,
      ...marks.keys(),
    ]);
    for (const [mark, address] of marks) if (found.has(mark)) found.add(address);
    return found;
  }

  /** Applies the rules to a claimed batch and returns what may be sent now, templates rendered. */
  async screen(rows: MessageRow[], at: Date, workerId: string): Promise<Screened> {
    if (rows.length === 0) return { rows, extras: new Map() };
    const decision = await this.decide(rows, at);
    const now = new Date().toISOString();
    await this.fail(decision.optedOut, 'opted_out', 'The recipient has opted out of this channel.', now);
    await this.fail(
      decision.noConsent,
      'no_consent',
      "The recipient's consent is not recorded as given (PRIVACY_REQUIRE_CONSENT).",
      now,
    );
    await this.fail(
      decision.silenced,
      'silence_period',
      "The recipient's constituency is in a silence period.",
      now,
    );
    if (decision.held.length > 0 && decision.holdUntil) {
      await releaseUnsent(this.deps.db, decision.held, workerId, now, decision.holdUntil.toISOString());
    }
    return this.render(decision.send);
  }

  private async templatesOf(
    workspaceId: number,
    rows: readonly MessageRow[],
  ): Promise<Map<number, TemplateRow>> {
    const ids = rows.map(templateId).filter((id): id is number => id !== undefined);
    const found = await findTemplates(this.deps.db, workspaceId, ids);
    return new Map(found.map((t) => [t.id, t]));
  }

  /**
   * Messages of a `tpl_` template carry its body with the variables in it: each is rendered now from its
   * recipient's voter record, and its cost is trued up to the rendered text (more reserved, or the
   * difference refunded). One whose extra credits the workspace lacks fails (refunded).
   */
  private async render(rows: MessageRow[]): Promise<Screened> {
    const extras = new Map<number, Partial<OutgoingMessage>>();
    const templated = rows.filter((r) => templateId(r) !== undefined);
    if (templated.length === 0) return { rows, extras };
    const dropped = new Set<number>();
    const byWorkspace = byWorkspaceOf(templated);
    for (const [workspaceId, group] of byWorkspace) {
      const templates = await this.templatesOf(workspaceId, group);
      await this.deps.db.transaction().execute(async (trx) => {
        const now = new Date().toISOString();
        for (const channel of new Set(group.map((r) => r.channel))) {
          const ofChannel = group.filter((r) => r.channel === channel);
          const voters = await votersByAddress(
            trx,
            workspaceId,
            channel,
            ofChannel.map((r) => r.to),
          );
          const credit = creditChannel(channel);
          for (const row of ofChannel) {
            const body = renderTemplate(row.body, voters.get(row.to));
            const cost = unitCost(channel, body);
            const ref = row.campaign_id !== null ? campaignRef(row.campaign_id) : messageRef(row.id);
            if (
              credit &&
              cost > row.cost &&
              !(await reserveCredits(trx, workspaceId, credit, cost - row.cost, ref, now))
            ) {
              const moved = await failMessages(
                trx,
                [row.id],
                'Not enough credits for the rendered text.',
                'cancelled',
                now,
              );
              await refund(trx, moved, now);
              await emitMessageEvents(trx, moved, 'message.failed', now);
              dropped.add(row.id);
              continue;
            }
            if (credit && cost < row.cost)
              await refundCredits(trx, workspaceId, credit, row.cost - cost, ref, now);
            await setRendered(trx, row.id, body, cost, now);
            row.body = body;
            row.cost = cost;
            const template = templates.get(templateId(row) ?? 0);
            extras.set(row.id, {
              ...dltFields(template),
              ...providerTemplateOf(template, voters.get(row.to)),
            });
          }
        }
      });
    }
    return { rows: rows.filter((r) => !dropped.has(r.id)), extras };
  }

  private async fail(ids: number[], code: MessageErrorCode, reason: string, now: string): Promise<void> {
    if (ids.length === 0) return;
    await this.deps.db.transaction().execute(async (trx) => {
      const moved = await failMessages(trx, ids, reason, code, now);
      await refund(trx, moved, now);
      await emitMessageEvents(trx, moved, 'message.failed', now);
    });
  }
}
