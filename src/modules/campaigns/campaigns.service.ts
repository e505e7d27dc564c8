import { cancelQueued } from '../sending/outbox.repository.ts';
import { silenceInForceUntil } from '../silence-periods/silence-periods.repository.ts';
import { findTemplate } from '../templates/templates.repository.ts';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Config } from '../../config.ts';
import { nowIso } from '../../db/connect.ts';
import type { CampaignRow, Database, TemplateRow } from '../../db/schema.ts';
import type { MessageChannel, MessageErrorCode, MessageStatus } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { AppError, type FieldErrors, notFound, validationError } from '../../errors.ts';
import { pageResult } from '../../domain.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import { refundCredits } from '../credits/credits.repository.ts';
import { listHistory } from '../messages/messages.repository.ts';
import { emitMessageEvents, historyItem, refund } from '../sending/lifecycle.ts';
import { creditChannel } from '../messages/messages.rules.ts';
import { withTemplate } from '../templates/templates.service.ts';
import { accountForSend, templateForAccount } from '../channel-accounts/channel-accounts.service.ts';
import {
  campaignStats,
  deleteCampaign,
  failedRecipients,
  findRetryOf,
  findCampaign,
  insertCampaign,
  listCampaigns,
  updateCampaign,
  type Stats,
} from './campaigns.repository.ts';
import { campaignAudit, queueCampaign } from './campaigns.queue.ts';
import { campaignViews, type Held, heldNow } from './campaigns.view.ts';
import {
  type AudienceInput,
  campaignColumns,
  type CampaignInput,
  type CampaignPatch,
  checkAudience,
  editable,
  EDITABLE,
  futureTime,
} from './campaigns.input.ts';
import { accountRef, campaignRef, isTemplateRef, parseRef, templateNumber } from '../../refs.ts';

/** Failures worth another try: the provider refused or could not deliver (not a bad address, an opt-out, a cancel). */
const RETRYABLE: MessageErrorCode[] = ['provider_rejected', 'undeliverable', 'rate_limited'];

/**
 * Campaigns and broadcasts (a broadcast is a campaign sent at once). Sending one counts its recipients in
 * the database (explicit recipients and a segment, deduplicated), reserves all their credits at once and
 * queues it; the delivery worker then fills the outbox set-based and sends.
 */
export class CampaignsService {
  constructor(
    private readonly deps: {
      db: Kysely<Database>;
      config: Pick<
        Config,
        'defaultCountry' | 'broadcastMaxRecipients' | 'delivery' | 'dltEnforce' | 'quietHours'
      >;
      log: FastifyBaseLogger;
      /** The deployment's provider of each channel (for campaigns on no channel account). */
      deployment?: Record<MessageChannel, string>;
    },
  ) {}

  async broadcast(workspaceId: number, given: AudienceInput, actor: AuditActor) {
    const { template, ...input } = await withTemplate(
      this.deps.db,
      workspaceId,
      given,
      this.deps.config.dltEnforce,
    );
    const account = await this.account(workspaceId, input, template);
    const audience = await checkAudience(this.deps, workspaceId, input, {});
    const now = nowIso();
    const row = await this.deps.db.transaction().execute(async (trx) => {
      const draft = await insertCampaign(trx, workspaceId, {
        ...campaignColumns(input, audience, now),
        channel_account_id: account,
        name: `Broadcast ${now.slice(0, 16).replace('T', ' ')} UTC`,
        status: 'draft',
      });
      await recordAudit(trx, { workspaceId, actor, action: 'broadcast.created', ...campaignAudit(draft) });
      return queueCampaign(trx, draft, now);
    });
    return {
      campaign_id: campaignRef(row.id),
      total_recipients: row.total_recipients,
      status: 'queued' as const,
    };
  }

  async create(workspaceId: number, given: CampaignInput) {
    const { template, ...input } = await withTemplate(
      this.deps.db,
      workspaceId,
      given,
      this.deps.config.dltEnforce,
    );
    const account = await this.account(workspaceId, input, template);
    const errors: FieldErrors = {};
    if (input.name.trim() === '') errors.name = ['must not be empty.'];
    const scheduledAt = futureTime(input.scheduled_at, errors);
    const audience = await checkAudience(this.deps, workspaceId, input, errors);
    const now = nowIso();
    const row = await insertCampaign(this.deps.db, workspaceId, {
      ...campaignColumns(input, audience, now),
      channel_account_id: account,
      name: input.name.trim(),
      status: scheduledAt ? 'scheduled' : 'draft',
      scheduled_at: scheduledAt ?? null,
    });
    return await this.view(row, undefined, await heldNow(this.deps, row));
  }

  async list(workspaceId: number, page: number, perPage: number) {
    const { rows, total } = await listCampaigns(this.deps.db, workspaceId, page, perPage);
    const stats = await campaignStats(
      this.deps.db,
      workspaceId,
      rows.map((r) => r.id),
    );
    // The workspace's silence periods in force, read once for the page (and only if a campaign needs them).
    const now = new Date();
    let silence: Promise<string | undefined> | undefined;
    const silenceOnce = () => (silence ??= silenceInForceUntil(this.deps.db, workspaceId, now.toISOString()));
    const helds = [];
    for (const r of rows) helds.push(await heldNow(this.deps, r, now, silenceOnce));
    return pageResult(
      await campaignViews(this.deps.db, this.deps.deployment, rows, stats, helds),
      total,
      page,
      perPage,
    );
  }

  async get(workspaceId: number, ref: string) {
    const row = await this.find(this.deps.db, workspaceId, ref);
    const stats = await campaignStats(this.deps.db, workspaceId, [row.id]);
    return await this.view(row, stats.get(row.id), await heldNow(this.deps, row));
  }

  /** Edits a draft or scheduled campaign (409 otherwise); the result is checked as a new one would be. */
  async update(workspaceId: number, ref: string, patch: CampaignPatch) {
    const { db } = this.deps;
    const current = await this.find(db, workspaceId, ref);
    editable(current);
    const errors: FieldErrors = {};
    const name = patch.name ?? current.name;
    if (name.trim() === '') errors.name = ['must not be empty.'];
    const keep = <T>(given: T | null | undefined, was: T | null): T | undefined =>
      given === undefined ? (was ?? undefined) : (given ?? undefined);
    const edited = {
      name,
      channel: current.channel,
      message: patch.message ?? current.message,
      recipients: keep(
        patch.recipients,
        current.recipients ? (JSON.parse(current.recipients) as string[]) : null,
      ),
      segment_id: keep(patch.segment_id, current.segment_id),
      subject: keep(patch.subject, current.subject),
      template_id: keep(patch.template_id, current.template_id),
      media_url: keep(patch.media_url, current.media_url),
      channel_account_id: keep(
        patch.channel_account_id,
        current.channel_account_id !== null ? accountRef(current.channel_account_id) : null,
      ),
    };
    // A tpl_ template given supplies the text, and DLT_ENFORCE is checked, as at create.
    let input = edited;
    let template: TemplateRow | undefined;
    if (patch.template_id !== undefined) {
      const { template: given, ...rendered } = await withTemplate(
        db,
        workspaceId,
        edited,
        this.deps.config.dltEnforce,
        patch.message === undefined,
      );
      input = rendered;
      template = given;
    } else if (isTemplateRef(edited.template_id)) {
      template = await findTemplate(db, workspaceId, templateNumber(edited.template_id));
    }
    const account = await this.account(workspaceId, input, template);
    const scheduledAt =
      patch.scheduled_at === undefined
        ? (current.scheduled_at ?? undefined)
        : futureTime(patch.scheduled_at ?? undefined, errors);
    const audience = await checkAudience(this.deps, workspaceId, input, errors);
    const columns = campaignColumns(input, audience, nowIso());
    const row = await updateCampaign(db, workspaceId, current.id, EDITABLE, {
      name: name.trim(),
      message: columns.message,
      subject: columns.subject,
      media_url: columns.media_url,
      template_id: columns.template_id,
      channel_account_id: account,
      segment_id: columns.segment_id,
      recipients: columns.recipients,
      unit_cost: columns.unit_cost,
      status: scheduledAt ? 'scheduled' : 'draft',
      scheduled_at: scheduledAt ?? null,
      updated_at: columns.updated_at,
    });
    if (!row) throw new AppError('conflict', 'The campaign was sent or cancelled meanwhile; read it again.');
    return await this.view(row, undefined, await heldNow(this.deps, row));
  }

  /** Deletes a draft or scheduled campaign (409 otherwise). */
  async remove(workspaceId: number, ref: string): Promise<void> {
    const current = await this.find(this.deps.db, workspaceId, ref);
    editable(current);
    if (!(await deleteCampaign(this.deps.db, workspaceId, current.id, EDITABLE))) {
      throw new AppError('conflict', 'The campaign was sent or cancelled meanwhile; read it again.');
    }
  }

  /** A campaign's messages, newest first, as message history shows them. */
  async messages(
    workspaceId: number,
    ref: string,
    query: { page: number; per_page: number; status?: MessageStatus | undefined },
  ) {
    const campaign = await this.find(this.deps.db, workspaceId, ref);
    const { rows, total } = await listHistory(
      this.deps.db,
      workspaceId,
      { campaignId: campaign.id, status: query.status },
      query.page,
      query.per_page,
    );
    return pageResult(rows.map(historyItem), total, query.page, query.per_page);
  }

  /**
   * A new campaign to the recipients of a completed or cancelled one whose messages failed with
   * provider_rejected or undeliverable, queued at once (credits reserved, 402 otherwise); nothing to retry is 409.
   * A campaign is retried once: while its retry exists and is not cancelled, another is 409 naming it (retry
   * that campaign's failures instead), also when two requests race (a unique index). Audited as
   * `campaign.retried`.
   */
  async retryFailed(workspaceId: number, ref: string, actor: AuditActor) {
    const alreadyRetried = (retry: CampaignRow) =>
      new AppError(
        'conflict',
        `This campaign's failures were already retried as ${campaignRef(retry.id)} (${retry.status}): retry that campaign's failures instead, or cancel it first.`,
        { retry_campaign_id: campaignRef(retry.id), status: retry.status },
      );
    const attempt = () =>
      this.deps.db.transaction().execute(async (trx) => {
        const original = await this.find(trx, workspaceId, ref);
        if (original.status !== 'completed' && original.status !== 'cancelled') {
          throw new AppError(
            'conflict',
            `The campaign is ${original.status}; only a completed or cancelled campaign's failures can be retried.`,
            { status: original.status },
          );
        }
        const retry = await findRetryOf(trx, workspaceId, original.id);
        if (retry) throw alreadyRetried(retry);
        const recipients = await failedRecipients(trx, workspaceId, original.id, RETRYABLE);
        if (recipients.length === 0) {
          throw new AppError(
            'conflict',
            'No message of this campaign failed with provider_rejected, undeliverable or rate_limited: there is nothing to retry.',
          );
        }
        const now = nowIso();
        const suffix = ` (retry of ${campaignRef(original.id)})`;
        const draft = await insertCampaign(trx, workspaceId, {
          ...campaignColumns(
            {
              channel: original.channel,
              message: original.message,
              subject: original.subject ?? undefined,
              template_id: original.template_id ?? undefined,
              media_url: original.media_url ?? undefined,
            },
            { recipients, segmentId: null },
            now,
          ),
          name: `${original.name.slice(0, 200 - suffix.length)}${suffix}`,
          status: 'draft',
          retry_of: original.id,
          channel_account_id: original.channel_account_id,
        });
        const started = await queueCampaign(trx, draft, now);
        await recordAudit(trx, {
          workspaceId,
          actor,
          action: 'campaign.retried',
          target: { type: 'campaign', id: campaignRef(original.id) },
          details: {
            retry_campaign_id: campaignRef(started.id),
            channel: started.channel,
            recipients: started.total_recipients,
          },
        });
        return started;
      });
    let row: CampaignRow;
    try {
      row = await attempt();
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      // Another request made the retry between this one's check and its insert.
      const id = parseRef('camp', ref);
      const retry = id === undefined ? undefined : await findRetryOf(this.deps.db, workspaceId, id);
      if (retry) throw alreadyRetried(retry);
      throw error;
    }
    return await this.view(row, undefined, await heldNow(this.deps, row));
  }

  /** A draft or scheduled campaign goes out now. */
  async send(workspaceId: number, ref: string, actor: AuditActor) {
    const row = await this.deps.db.transaction().execute(async (trx) => {
      const campaign = await this.find(trx, workspaceId, ref);
      if (campaign.status !== 'draft' && campaign.status !== 'scheduled') {
        throw new AppError(
          'conflict',
          `The campaign is ${campaign.status}; only a draft or scheduled one can be sent.`,
          {
            status: campaign.status,
          },
        );
      }
      await recordAudit(trx, { workspaceId, actor, action: 'campaign.sent', ...campaignAudit(campaign) });
      return queueCampaign(trx, campaign, nowIso());
    });
    return await this.view(row, undefined, await heldNow(this.deps, row));
  }

  /** Stops what has not gone out and refunds it. */
  async cancel(workspaceId: number, ref: string, actor: AuditActor) {
    const { db } = this.deps;
    let inFlight = 0;
    const row = await db.transaction().execute(async (trx) => {
      const campaign = await this.find(trx, workspaceId, ref);
      const now = nowIso();
      const set = {
        status: 'cancelled' as const,
        status_reason: 'cancelled by a user',
        updated_at: now,
        completed_at: now,
      };
      const moved = await (async () => {
        switch (campaign.status) {
          case 'draft':
          case 'scheduled':
            return updateCampaign(trx, workspaceId, campaign.id, [campaign.status], set);
          case 'queued': {
            if (campaign.lease_until && campaign.lease_until > now) {
              throw new AppError(
                'conflict',
                'The campaign is being prepared for sending; cancel it again in a moment.',
              );
            }
            const moved = await updateCampaign(trx, workspaceId, campaign.id, ['queued'], set);
            const credit = creditChannel(campaign.channel);
            if (moved && credit) {
              await refundCredits(
                trx,
                workspaceId,
                credit,
                campaign.reserved_credits,
                campaignRef(campaign.id),
                now,
              );
            }
            return moved;
          }
          case 'sending': {
            const moved = await updateCampaign(trx, workspaceId, campaign.id, ['sending'], set);
            if (moved) {
              const stopped = await cancelQueued(
                trx,
                workspaceId,
                { campaignId: campaign.id },
                'The campaign was cancelled before this message went out.',
                now,
              );
              inFlight = stopped.inFlight;
              await refund(trx, stopped.stopped, now);
              // Cancelled messages end `failed`: their message.failed events go with them.
              await emitMessageEvents(trx, stopped.stopped, 'message.failed', now);
            }
            return moved;
          }
          default:
            throw new AppError('conflict', `The campaign is already ${campaign.status}.`, {
              status: campaign.status,
            });
        }
      })();
      // A campaign another request moved meanwhile is refused, and nothing (the audit entry included) is kept.
      if (!moved) throw new AppError('conflict', 'The campaign changed meanwhile; read it again.');
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'campaign.cancelled',
        ...campaignAudit(campaign),
      });
      return moved;
    });
    const stats = await campaignStats(db, workspaceId, [row.id]);
    return {
      ...(await this.view(row, stats.get(row.id), await heldNow(this.deps, row))),
      in_flight: inFlight,
    };
  }

  // ---- Internals. ----

  /** A campaign as items show it, with what carries its messages (or would now) and its latest failure. */
  private async view(row: CampaignRow, counted: Stats | undefined, held: Held) {
    return (
      await campaignViews(
        this.deps.db,
        this.deps.deployment,
        [row],
        new Map(counted ? [[row.id, counted]] : []),
        [held],
      )
    )[0]!;
  }

  private async find(db: Executor, workspaceId: number, ref: string): Promise<CampaignRow> {
    const id = parseRef('camp', ref);
    const row = id === undefined ? undefined : await findCampaign(db, workspaceId, id);
    if (!row) throw notFound('Campaign');
    return row;
  }

  /**
   * The account a campaign names (422 on channel_account_id unless it is an active account of the workspace
   * for the channel), checked with the template against what the provider needs (its own template, where it sends only those);
   * the workspace's default is checked the same way but not stored: the default when it goes out is used.
   */
  private async account(
    workspaceId: number,
    input: { channel: MessageChannel; channel_account_id?: string | undefined },
    template: TemplateRow | undefined,
  ): Promise<number | null> {
    const account = await accountForSend(this.deps.db, workspaceId, input.channel, input.channel_account_id);
    const errors: FieldErrors = {};
    templateForAccount(account, template, errors);
    if (Object.keys(errors).length > 0) throw validationError(errors);
    return input.channel_account_id !== undefined && account ? account.id : null;
  }
}
