import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Config } from '../../config.ts';
import { nowIso } from '../../db/connect.ts';
import type { ChannelAccountRow, Database } from '../../db/schema.ts';
import type { MessageChannel, MessageStatus } from '../../domain.ts';
import { AppError, type FieldErrors, notFound, validationError } from '../../errors.ts';
import { pageResult } from '../../domain.ts';
import type { Providers } from '../../providers/provider.ts';
import { channelLogFor } from '../sending/channel-log.ts';
import { finalCode, handOver, type HandOverResult } from '../sending/hand-over.ts';
import { balances, reserveCredits } from '../credits/credits.repository.ts';
import { failureCounts, findMessage, insertMessage, listHistory } from './messages.repository.ts';
import {
  addressProblem,
  contentProblems,
  creditChannel,
  insufficientCredits,
  recipientAddress,
  unitCost,
} from './messages.rules.ts';
import { refuseOptedOut } from '../opt-outs/opt-outs.service.ts';
import {
  dltFields,
  dltVariableProblems,
  providerTemplateOf,
  renderFor,
  withTemplate,
} from '../templates/templates.service.ts';
import { sendsTemplatesOnly } from '../../providers/adapter.ts';
import { adapterNamed } from '../../providers/registry.ts';
import type { VoterFields } from '../sending/render.ts';
import { type AccountPace, type AccountProviders, PaceUnavailable } from '../sending/accounts.ts';
import {
  accountForSend,
  disableForAuth,
  templateForAccount,
} from '../channel-accounts/channel-accounts.service.ts';
import { conversationFor, touchOutbound } from '../conversations/conversations.thread.ts';
import { type Handover, releaseUnsent, renewClaim } from '../sending/outbox.repository.ts';
import { dateBounds } from '../../lib/dates.ts';
import { historyItem, MessageLifecycle } from '../sending/lifecycle.ts';
import { accountRef, messageRef, parseRef } from '../../refs.ts';

export interface SendInput {
  channel: MessageChannel;
  to: string;
  /** Required unless template_id names a tpl_ template. */
  message?: string | undefined;
  subject?: string | undefined;
  template_id?: string | undefined;
  media_url?: string | undefined;
  /** The channel account to send through (`cha_<n>`); default: the workspace's default for the channel. */
  channel_account_id?: string | undefined;
}

export interface HistoryInput {
  page: number;
  per_page: number;
  channel?: MessageChannel | undefined;
  status?: MessageStatus | undefined;
  date_from?: string | undefined;
  date_to?: string | undefined;
  campaign_id?: string | undefined;
  to?: string | undefined;
  voter_id?: number | undefined;
}

/**
 * Single sends and history. A message's life after it is handed over (sent, delivered, failed, refunded) is
 * the outbox's (`sending/lifecycle.ts`), shared with the delivery worker and providers' callbacks.
 */
export interface SendOptions {
  /** A channel account's test send: a refusal is 422 provider_rejected with the provider's code and text. */
  test?: boolean;
  /** The member who sent it (replies, sends by a signed-in user). */
  sentBy?: number | undefined;
  /** Values for the template's variables, instead of the voter's (a conversation's template reply). */
  variables?: Readonly<Record<string, string>> | undefined;
  /** The conversation it answers (a reply): known to the caller, not looked up again. */
  conversationId?: number | undefined;
}

export class MessagesService {
  constructor(
    private readonly deps: {
      db: Kysely<Database>;
      config: Pick<Config, 'defaultCountry' | 'delivery' | 'dltEnforce' | 'appKey'>;
      providers: Providers;
      log: FastifyBaseLogger;
      /** Channel accounts' providers and their shared send rate. */
      accounts: AccountProviders;
      pace: AccountPace;
    },
  ) {
    this.lifecycle = new MessageLifecycle(deps.db);
  }

  private readonly lifecycle: MessageLifecycle;

  /**
   * Sends one message within the request. The message is a row (claimed by this request for a lease) and its
   * credits are reserved before the provider sees it; should this process die before recording the
   * provider's answer, the delivery worker picks the row up when the lease ends.
   */
  async send(workspaceId: number, given: SendInput, options: SendOptions = {}) {
    const { db, config, providers, accounts } = this.deps;
    const send = await this.prepare(workspaceId, given, options);
    const { account, template, input, to, conversationId } = send;
    const claimedBy = `api:${process.pid}:${randomUUID().slice(0, 8)}`;
    const row = await this.queueClaimed(workspaceId, send, options, claimedBy);
    const provider = account ? accounts.providerFor(account, input.channel) : providers[input.channel];
    const answer = () =>
      this.sentOrQueued(workspaceId, row.id, input.channel, to, account?.id ?? null, provider.name);
    if (account && !(await this.holdTurn(account, row.id, claimedBy))) return answer();
    // Bounded by PROVIDER_TIMEOUT_MS (well within the lease): a provider that hangs gets a 502, not a hung request.
    const message = {
      channel: input.channel,
      to,
      body: input.message,
      subject: input.subject,
      mediaUrl: input.media_url,
      templateId: input.template_id,
      reference: messageRef(row.id),
      ...dltFields(template),
      ...providerTemplateOf(template, send.voter, options.variables),
    };
    // The worker's hand-over and its reading of the answer; a single send is not tried again.
    const [result] = await handOver(
      provider,
      [row.id],
      message,
      config.delivery.providerTimeoutMs,
      account && {
        log: channelLogFor(db),
        account,
        kind: options.test ? 'test' : 'send',
        secrets: accounts.secrets(account),
      },
    );
    if (result!.kind === 'refused')
      throw await this.refused(row.id, result!, provider.name, account, input.channel, options.test);
    // The provider has it: the hand-over is recorded, tried again while the database refuses, never failed.
    await this.recordHandover(result!.handover);
    if (conversationId !== undefined) await touchOutbound(db, conversationId, input.message, nowIso());
    return answer();
  }

  /**
   * A send checked before anything is stored: the account (its credentials readable), the address, the content
   * and the template the channel needs (422 with every problem), the opt-out (422), the text rendered for the
   * voter, and the conversation it joins.
   */
  private async prepare(workspaceId: number, given: SendInput, options: SendOptions) {
    const { db, config, accounts } = this.deps;
    const errors: FieldErrors = {};
    const account = await accountForSend(db, workspaceId, given.channel, given.channel_account_id);
    if (account && !accounts.readable(account)) {
      const ref = accountRef(account.id);
      throw new AppError(
        'conflict',
        `The channel account ${ref}'s credentials cannot be read: they were sealed under another APP_KEY. Give them again with PATCH /api/channel-accounts/${ref}.`,
        { channel_account_id: ref },
      );
    }
    const { template, ...input } = await withTemplate(db, workspaceId, given, config.dltEnforce);
    const to = recipientAddress(input.channel, input.to, config.defaultCountry);
    if (!to) errors.to = [addressProblem(input.channel)];
    contentProblems(input, errors);
    templateForAccount(account, template, errors);
    dltVariableProblems(
      template,
      options.variables,
      Boolean(
        account && sendsTemplatesOnly(adapterNamed(account.provider), input.channel, config.dltEnforce),
      ),
      errors,
    );
    if (!to || Object.keys(errors).length > 0) throw validationError(errors);
    await refuseOptedOut(db, workspaceId, input.channel, to, config.appKey);
    let voter: VoterFields | undefined;
    if (template)
      ({ text: input.message, voter } = await renderFor(
        db,
        workspaceId,
        input.channel,
        to,
        input.message,
        options.variables,
      ));
    // A send to a contact with a conversation joins its thread.
    const conversationId =
      options.conversationId ?? (await conversationFor(db, workspaceId, input.channel, to))?.id;
    return { account, template, input, to, voter, conversationId };
  }

  /**
   * The message stored, claimed by this request for a lease (a worker takes it over if the request dies), with
   * its credits reserved in the same transaction (402 when short).
   */
  private async queueClaimed(
    workspaceId: number,
    send: Awaited<ReturnType<MessagesService['prepare']>>,
    options: SendOptions,
    claimedBy: string,
  ) {
    const { db, config } = this.deps;
    const { account, input, to, conversationId } = send;
    const cost = unitCost(input.channel, input.message);
    const credit = creditChannel(input.channel);
    const now = nowIso();
    const leaseUntil = new Date(Date.now() + config.delivery.leaseSeconds * 1000).toISOString();
    return db.transaction().execute(async (trx) => {
      const row = await insertMessage(trx, workspaceId, {
        campaign_id: null,
        channel: input.channel,
        to,
        body: input.message,
        subject: input.subject ?? null,
        media_url: input.media_url ?? null,
        template_id: input.template_id ?? null,
        channel_account_id: account?.id ?? null,
        conversation_id: conversationId ?? null,
        sent_by: options.sentBy ?? null,
        status: 'queued',
        cost,
        claimed_by: claimedBy,
        lease_until: leaseUntil,
        attempts: 1,
        next_attempt_at: leaseUntil,
        created_at: now,
        updated_at: now,
      });
      if (credit && !(await reserveCredits(trx, workspaceId, credit, cost, messageRef(row.id), now))) {
        const available = (await balances(trx, workspaceId))[credit];
        throw insufficientCredits(credit, cost, available);
      }
      return row;
    });
  }

  /**
   * Waits for the account's pace (at most a quarter of the lease) and renews the claim; false when the message is
   * left to the delivery worker's lane: the pace is not to be had, or the wait ran past the lease (the call is made
   * only while this request still holds the message, never beside a worker that took it meanwhile).
   */
  private async holdTurn(account: ChannelAccountRow, id: number, claimedBy: string): Promise<boolean> {
    const { db, config } = this.deps;
    try {
      await this.deps.pace.take(
        account.id,
        account.send_rate_per_second,
        1,
        config.delivery.leaseSeconds * 250,
      );
    } catch (error) {
      if (!(error instanceof PaceUnavailable)) throw error;
      await releaseUnsent(db, [id], claimedBy, nowIso());
      return false;
    }
    return renewClaim(db, id, claimedBy, config.delivery.leaseSeconds);
  }

  /**
   * A refused single send: failed and refunded, the account disabled when the provider refused its credentials,
   * and the error to answer (a test send's says what the provider said).
   */
  private async refused(
    id: number,
    result: Extract<HandOverResult, { kind: 'refused' }>,
    provider: string,
    account: ChannelAccountRow | undefined,
    channel: string,
    test: boolean | undefined,
  ): Promise<AppError> {
    const { reason } = result;
    const code = finalCode(result);
    await this.lifecycle.fail([id], reason, code);
    if (account && code === 'auth_failed') await disableForAuth(this.deps.db, account, reason);
    this.deps.log.warn({ message_id: id, provider, err: reason }, 'send refused');
    if (test)
      return new AppError('provider_rejected', `${provider} refused the test message: ${reason}`, {
        id: messageRef(id),
        provider,
        error_code: code,
        error_message: reason,
      });
    return new AppError(
      'provider_error',
      `The ${channel} provider did not accept the message; it is recorded as failed and its credits were refunded.`,
      { id: messageRef(id), status: 'failed', provider },
    );
  }

  /** The answer of a send: the message as it now is (sent, or queued when a worker took it over). */
  private async sentOrQueued(
    workspaceId: number,
    id: number,
    channel: MessageChannel,
    to: string,
    accountId: number | null,
    provider: string,
  ) {
    const sent = await findMessage(this.deps.db, workspaceId, id);
    return {
      id: messageRef(id),
      status: sent?.status ?? ('queued' as const),
      channel,
      to,
      channel_account_id: accountId !== null ? accountRef(accountId) : null,
      provider,
      provider_message_id: sent?.provider_message_id ?? null,
    };
  }

  /**
   * Records a hand-over the provider accepted, trying again for up to half the lease while the database fails
   * (the message must not be failed and refunded: a retried send would reach the voter twice). Past that the
   * error goes up (503) with the message still claimed by this request.
   */
  private async recordHandover(handover: Handover): Promise<void> {
    const until = Date.now() + (this.deps.config.delivery.leaseSeconds * 1000) / 2;
    for (let wait = 50; ; wait = Math.min(wait * 2, 1000)) {
      try {
        await this.lifecycle.handedOver([handover]);
        return;
      } catch (error) {
        if (Date.now() + wait > until) throw error;
        this.deps.log.warn(
          { message_id: handover.id, err: error },
          'recording a hand-over failed: trying again',
        );
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  async history(workspaceId: number, query: HistoryInput) {
    const errors: FieldErrors = {};
    const from = query.date_from !== undefined ? dateBounds(query.date_from) : undefined;
    const to = query.date_to !== undefined ? dateBounds(query.date_to) : undefined;
    const problem = 'must be an ISO 8601 date (2026-01-31) or date-time (2026-01-31T09:30:00Z).';
    if (query.date_from !== undefined && !from) errors.date_from = [problem];
    if (query.date_to !== undefined && !to) errors.date_to = [problem];
    if (from && to && from[0] >= to[1]) errors.date_to = ['must not be before date_from.'];
    const campaignId = query.campaign_id !== undefined ? parseRef('camp', query.campaign_id) : undefined;
    if (query.campaign_id !== undefined && campaignId === undefined) {
      errors.campaign_id = ['must be a campaign id such as camp_12.'];
    }
    let toAny: string[] | undefined;
    if (query.voter_id !== undefined) {
      const voter = await this.deps.db
        .selectFrom('voters')
        .select(['phone', 'email'])
        .where('workspace_id', '=', workspaceId)
        .where('id', '=', query.voter_id)
        .executeTakeFirst();
      if (!voter) errors.voter_id = ['is not a voter of this workspace.'];
      else toAny = [...(voter.phone ? [voter.phone] : []), ...(voter.email ? [voter.email] : [])];
    }
    if (Object.keys(errors).length > 0) throw validationError(errors);
    const { rows, total } = await listHistory(
      this.deps.db,
      workspaceId,
      {
        channel: query.channel,
        status: query.status,
        campaignId,
        to: query.to !== undefined ? this.recipientKey(query.to) : undefined,
        toAny,
        from: from?.[0],
        before: to?.[1],
      },
      query.page,
      query.per_page,
    );
    return pageResult(rows.map(historyItem), total, query.page, query.per_page);
  }

  /** Failed messages by error code over a window (default the last 24 hours): the dashboard's failures. */
  async failures(
    workspaceId: number,
    query: { since?: string | undefined; until?: string | undefined; campaign_id?: string | undefined },
  ) {
    const errors: FieldErrors = {};
    const problem = 'must be an ISO 8601 date (2026-01-31) or date-time (2026-01-31T09:30:00Z).';
    const since = query.since !== undefined ? dateBounds(query.since) : undefined;
    const until = query.until !== undefined ? dateBounds(query.until) : undefined;
    if (query.since !== undefined && !since) errors.since = [problem];
    if (query.until !== undefined && !until) errors.until = [problem];
    const campaignId = query.campaign_id !== undefined ? parseRef('camp', query.campaign_id) : undefined;
    if (query.campaign_id !== undefined && campaignId === undefined)
      errors.campaign_id = ['must be a campaign id such as camp_12.'];
    const before = until?.[1] ?? new Date(Date.now() + 1).toISOString();
    const from = since?.[0] ?? new Date(Date.parse(before) - 86_400_000).toISOString();
    if (!errors.since && !errors.until && from >= before) errors.until = ['must not be before since.'];
    if (Object.keys(errors).length > 0) throw validationError(errors);
    return failureCounts(this.deps.db, workspaceId, from, before, campaignId);
  }

  async get(workspaceId: number, ref: string) {
    const id = parseRef('msg', ref);
    const row = id === undefined ? undefined : await findMessage(this.deps.db, workspaceId, id);
    if (!row) throw notFound('Message');
    return historyItem(row);
  }

  /** A recipient as messages store it: an email lower-cased, a phone in E.164 (as typed when it does not parse). */
  private recipientKey(raw: string): string {
    const text = raw.trim();
    if (text.includes('@')) return text.toLowerCase();
    return recipientAddress('sms', text, this.deps.config.defaultCountry) ?? text;
  }
}
