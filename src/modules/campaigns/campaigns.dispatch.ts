// What the delivery worker does with campaigns: start the scheduled ones that are due, fill a queued one's
// outbox, and complete the drained ones. The users' actions on campaigns are in campaigns.service.ts.
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Config } from '../../config.ts';
import { nowIso } from '../../db/connect.ts';
import type { Database } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import { ChunkPacer } from '../../lib/pacing.ts';
import { recordAudit } from '../audit/audit.repository.ts';
import { channelCarrier } from '../channel-accounts/channel-accounts.service.ts';
import { refundCredits, reserveCredits } from '../credits/credits.repository.ts';
import { creditChannel } from '../messages/messages.rules.ts';
import { emitMessageEvents } from '../sending/lifecycle.ts';
import { failMessages } from '../sending/outbox.repository.ts';
import { segmentFilters } from '../segments/segments.service.ts';
import {
  claimQueuedCampaign,
  completeDrainedCampaigns,
  countCampaignMessages,
  dueScheduledCampaigns,
  firstVoterId,
  insertRecipientMessages,
  insertSegmentMessages,
  newestQueued,
  updateCampaign,
} from './campaigns.repository.ts';
import { campaignAudit, queueCampaign } from './campaigns.queue.ts';
import { campaignRef } from '../../refs.ts';

/**
 * Voters are added to the outbox in id ranges sized by time (ChunkPacer, about 70 ms each): each INSERT ...
 * SELECT stays short, and on SQLite a worker inside the API process lets other requests run between two.
 */
const FILL_FIRST_CHUNK = 5_000;
const FILL_MAX_CHUNK = 100_000;

export class CampaignDispatch {
  constructor(
    private readonly deps: {
      db: Kysely<Database>;
      config: Pick<Config, 'delivery'>;
      log: FastifyBaseLogger;
    },
  ) {}

  /** Starts scheduled campaigns whose time has come; one that cannot start (credits, segment gone) is cancelled. */
  async startDue(): Promise<number> {
    const { db, log } = this.deps;
    let started = 0;
    for (const campaign of await dueScheduledCampaigns(db, nowIso(), 20)) {
      try {
        await db.transaction().execute(async (trx) => {
          // Started by its schedule: the service is the actor (actor_id null).
          await recordAudit(trx, {
            workspaceId: campaign.workspace_id,
            actor: { userId: null, ip: null },
            action: 'campaign.sent',
            ...campaignAudit(campaign),
          });
          return queueCampaign(trx, campaign, nowIso());
        });
        started += 1;
      } catch (error) {
        if (!(error instanceof AppError)) throw error;
        const now = nowIso();
        await updateCampaign(db, campaign.workspace_id, campaign.id, ['scheduled'], {
          status: 'cancelled',
          status_reason: error.message.slice(0, 200),
          updated_at: now,
          completed_at: now,
        });
        log.warn({ campaign_id: campaign.id, reason: error.code }, 'scheduled campaign could not start');
      }
    }
    return started;
  }

  /**
   * Fills the outbox of one queued campaign: explicit recipients, then the segment's voters in id ranges, each
   * an INSERT ... SELECT in the database. Repeating a fill (after a crash) inserts nothing twice. Then the
   * reservation is trued up to the rows actually written and the campaign is `sending`.
   */
  async fillNext(): Promise<boolean> {
    const { db, config } = this.deps;
    const now = nowIso();
    const leaseUntil = new Date(Date.now() + config.delivery.leaseSeconds * 1000).toISOString();
    const claimed = await claimQueuedCampaign(db, now, leaseUntil);
    if (!claimed) return false;
    const ws = claimed.workspace_id;
    const campaign =
      (await updateCampaign(db, ws, claimed.id, ['queued'], { started_at: claimed.started_at ?? now })) ??
      claimed;
    const recipients = JSON.parse(campaign.recipients ?? '[]') as string[];
    // The campaign's account, else what carries the channel now; where the workspace's accounts for it are all
    // switched off, the messages name one of them and fail as switched off: never the deployment's provider.
    const carrier =
      campaign.channel_account_id === null ? await channelCarrier(db, ws, campaign.channel) : {};
    const accountId = campaign.channel_account_id ?? (carrier.account ?? carrier.off)?.id ?? null;
    await insertRecipientMessages(db, ws, campaign, recipients, campaign.started_at ?? now, accountId);
    if (campaign.segment_id !== null && campaign.voter_id_limit !== null) {
      // A segment deleted since the campaign was queued fills nothing; any other failure (a database timeout, a
      // reset connection) stops this fill, and the campaign, still queued, is filled again once its lease ends.
      const filters = await segmentFilters(db, ws, campaign.segment_id).catch((error: unknown) => {
        if (error instanceof AppError && error.code === 'not_found') return undefined;
        throw error;
      });
      if (filters) {
        const first = await firstVoterId(db, ws);
        const pacer = new ChunkPacer(FILL_FIRST_CHUNK, 500, FILL_MAX_CHUNK);
        for (let after = first - 1; after < campaign.voter_id_limit;) {
          const upTo = Math.min(after + pacer.size, campaign.voter_id_limit);
          const started = performance.now();
          await insertSegmentMessages(db, ws, campaign, filters, after, upTo, accountId);
          await pacer.pause(upTo - after, performance.now() - started);
          after = upTo;
          // Still filling: keep the claim (another worker would otherwise start over beside this one).
          const renewed = new Date(Date.now() + config.delivery.leaseSeconds * 1000).toISOString();
          await updateCampaign(db, ws, campaign.id, ['queued'], { lease_until: renewed });
        }
      }
    }
    await db.transaction().execute(async (trx) => {
      const written = await countCampaignMessages(trx, ws, campaign.id);
      const t = nowIso();
      const credit = creditChannel(campaign.channel);
      const difference = (campaign.total_recipients - written) * campaign.unit_cost;
      // Whoever moves the campaign to `sending` trues up the credits, exactly once.
      const moved = await updateCampaign(trx, ws, campaign.id, ['queued'], {
        status: 'sending',
        total_recipients: written,
        reserved_credits: Math.max(campaign.reserved_credits - difference, 0),
        lease_until: null,
        updated_at: t,
      });
      if (!moved) return;
      if (difference > 0 && credit) {
        // Shared phones (one message each) or voters gone since the count: their credits go back.
        await refundCredits(trx, ws, credit, difference, campaignRef(campaign.id), t);
      } else if (difference < 0 && credit) {
        if (!(await reserveCredits(trx, ws, credit, -difference, campaignRef(campaign.id), t))) {
          const extra = await newestQueued(trx, ws, campaign.id, written - campaign.total_recipients);
          await emitMessageEvents(
            trx,
            await failMessages(
              trx,
              extra,
              'Not enough credits when the campaign went out: this message was not sent.',
              'cancelled',
              t,
            ),
            'message.failed',
            t,
          );
        }
      }
    });
    return true;
  }

  async completeDrained(): Promise<number> {
    return completeDrainedCampaigns(this.deps.db, nowIso());
  }
}
