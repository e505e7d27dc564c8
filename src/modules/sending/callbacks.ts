import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import type { ChannelAccountRow, Database, MessageRow } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import type { CallAnswer, CallbackReport, CallbackResult } from '../../providers/adapter.ts';
import type { ReportOutcome } from '../../providers/provider.ts';
import type { InboundService } from '../inbound/inbound.service.ts';
import { messageById, messagesByProviderIds, noteSentStatus } from '../messages/messages.repository.ts';
import { optOutByProvider } from '../opt-outs/opt-outs.service.ts';
import type { SurveyCalls } from '../surveys/survey-calls.ts';
import type { MessageLifecycle } from './lifecycle.ts';
import { parseRef } from '../../refs.ts';

/** The most messages and reports one callback body may carry (more is 413). */
export const MAX_CALLBACK_ITEMS = 1000;
/** A callback body is applied in slices of at most this much time, each followed by a turn for other requests. */
const SLICE_MS = 20;

type Found = { message: MessageRow | undefined; outcome: ReportOutcome | undefined; optOut: boolean };

/** Where a callback came from: an account (its workspace), or the deployment's provider (null, null). */
export interface CallbackSource {
  provider: string;
  workspaceId: number | null;
  accountId: number | null;
  ip: string | null;
}

/**
 * What a provider's callback means for the outbox, once its adapter has read it (the route finds the account,
 * asks the adapter, and answers; this applies): delivery reports move messages through the lifecycle's
 * conditional updates, so a repeated or late report never moves a message back; a STOP the provider reports is
 * an opt-out; replies join conversations; an IVR call's steps are answered with what to say, in no provider's
 * format (the adapter renders it: `answerCall`).
 */
export class ProviderCallbacks {
  constructor(
    private readonly deps: {
      db: Kysely<Database>;
      lifecycle: MessageLifecycle;
      inbound: InboundService;
      /** IVR surveys' Gather and Passthru requests, and missed calls. */
      surveyCalls: SurveyCalls;
    },
  ) {}

  /** Applies what the adapter read: reports, opt-outs its provider reported, replies. Returns how many applied. */
  async settle(result: CallbackResult, source: CallbackSource): Promise<number> {
    const reports = result.reports ?? [];
    const replies = result.replies ?? [];
    tooMany(reports.length + replies.length);
    const found = await this.messagesOf(source.accountId, reports);
    let applied = 0;
    await inSlices(
      found,
      50,
      async (slice) => void (applied += await this.applySlice(source.accountId, slice)),
    );
    // The recipient told the provider to stop (STOP to its number): an opt-out in the message's workspace.
    for (const { message, optOut } of found)
      if (optOut && message && message.channel_account_id === source.accountId)
        await optOutByProvider(this.deps.db, message.id);
    await inSlices(replies, 1, async ([reply]) => {
      const input = {
        channel: reply!.channel,
        from: reply!.from,
        body: reply!.body.slice(0, 5000),
        providerMessageId: reply!.id.slice(0, 128) || undefined,
      };
      const { inbound } = this.deps;
      if (source.workspaceId === null)
        applied += await inbound.receiveFromProvider(input, source.provider, source.ip);
      else if (
        await inbound.receiveForAccount(
          source.workspaceId,
          { ...input, channelAccountId: source.accountId! },
          source.provider,
          source.ip,
        )
      )
        applied += 1;
    });
    return applied;
  }

  /**
   * A call's step, answered with what to say: the text of an IVR message (`speak`), or an IVR survey's Gather
   * (the question), Passthru (whether questions remain) or missed call (whether a survey started).
   */
  async call(row: ChannelAccountRow, result: Pick<CallbackResult, 'speak' | 'survey'>): Promise<CallAnswer> {
    const { surveyCalls } = this.deps;
    if (result.speak) return { kind: 'say', text: await this.callText(row, result.speak) };
    const step = result.survey!;
    if (step.step === 'gather') return surveyCalls.gather(row, step.messageRef, step.callId);
    if (step.step === 'answer')
      return {
        kind: 'answered',
        more: await surveyCalls.answer(row, step.messageRef, step.callId, step.digits),
      };
    return { kind: 'missed_call', started: (await surveyCalls.missedCall(row, step.from)) !== undefined };
  }

  /** An IVR call's text: the message of this account with that id and call; 404 otherwise. */
  private async callText(row: ChannelAccountRow, ask: NonNullable<CallbackResult['speak']>): Promise<string> {
    const id = parseRef('msg', ask.messageRef);
    const message = id === undefined ? undefined : await messageById(this.deps.db, id);
    const known =
      message &&
      message.channel_account_id === row.id &&
      message.channel === 'ivr' &&
      (message.provider_message_id === null || message.provider_message_id === ask.callId);
    if (!known) throw new AppError('not_found', 'No call of this account has that call id and message id.');
    return message.body;
  }

  private async applySlice(accountId: number | null, found: Found[]): Promise<number> {
    let applied = 0;
    const notes: Array<{ id: number; error: string }> = [];
    const reports = [];
    for (const { message, outcome } of found) {
      if (!message || !outcome || message.channel_account_id !== accountId) continue;
      applied += 1;
      if (outcome.status === 'sent') notes.push({ id: message.id, error: outcome.error });
      else if (outcome.status === 'delivered')
        reports.push({ messageId: message.id, status: 'delivered' as const });
      else
        reports.push({
          messageId: message.id,
          status: 'failed' as const,
          error: outcome.error,
          errorCode: outcome.code,
        });
    }
    await this.deps.lifecycle.applyReports(reports);
    // A status that is neither delivered nor failed is kept in error_message while the message stays sent.
    for (const note of notes) await noteSentStatus(this.deps.db, note.id, note.error, nowIso());
    return applied;
  }

  /** The messages reports name: by our id, or by the provider's id (and number, where one id is many). */
  private async messagesOf(accountId: number | null, reports: CallbackReport[]): Promise<Found[]> {
    const { db } = this.deps;
    const ids = reports.map((r) => r.providerMessageId).filter((id): id is string => !!id);
    const byProvider =
      ids.length === 0 || accountId === null ? [] : await messagesByProviderIds(db, accountId, ids);
    const keyed = new Map(byProvider.map((m) => [`${m.provider_message_id}|${m.to}`, m]));
    const single = new Map(byProvider.map((m) => [m.provider_message_id, m]));
    const found: Found[] = [];
    for (const report of reports) {
      let message: MessageRow | undefined;
      if (report.messageRef !== undefined) {
        const id = parseRef('msg', report.messageRef);
        message = id === undefined ? undefined : await messageById(db, id);
      } else if (report.providerMessageId)
        message =
          report.to === undefined
            ? single.get(report.providerMessageId)
            : keyed.get(`${report.providerMessageId}|${report.to}`);
      found.push({ message, outcome: report.outcome, optOut: report.optOut === true });
    }
    return found;
  }
}

function tooMany(count: number): void {
  if (count > MAX_CALLBACK_ITEMS)
    throw new AppError(
      'payload_too_large',
      `This body carries ${count} messages and reports; one body may carry at most ${MAX_CALLBACK_ITEMS}. Nothing was applied: send them in smaller bodies.`,
    );
}

/**
 * Runs `each` over `items` in slices of about SLICE_MS, giving the event loop a turn between slices: on SQLite
 * every statement runs on the one thread, and a loop over a large body would hold every other request.
 */
async function inSlices<T>(
  items: readonly T[],
  size: number,
  each: (slice: T[]) => Promise<void>,
): Promise<void> {
  let since = performance.now();
  for (let i = 0; i < items.length; i += size) {
    await each(items.slice(i, i + size));
    if (performance.now() - since >= SLICE_MS) {
      await new Promise((resolve) => setImmediate(resolve));
      since = performance.now();
    }
  }
}
