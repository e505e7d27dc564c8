// Queueing a campaign (its send, a broadcast, a retry, or its schedule coming due): count, reserve, queue.
import type { CampaignRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { AppError } from '../../errors.ts';
import { balances, reserveCredits } from '../credits/credits.repository.ts';
import { creditChannel, insufficientCredits } from '../messages/messages.rules.ts';
import { segmentFilters } from '../segments/segments.service.ts';
import type { VoterFilters } from '../voters/voters.search.ts';
import {
  countSegmentAddresses,
  segmentOverlap,
  updateCampaign,
  voterIdLimit,
} from './campaigns.repository.ts';
import { campaignRef } from '../../refs.ts';

/**
 * Counts the recipients in the database, reserves all their credits at once (402 otherwise) and queues the
 * campaign, in the caller's transaction.
 */
export async function queueCampaign(trx: Executor, campaign: CampaignRow, now: string): Promise<CampaignRow> {
  const ws = campaign.workspace_id;
  const recipients = JSON.parse(campaign.recipients ?? '[]') as string[];
  let total = recipients.length;
  let limitId: number | null = null;
  if (campaign.segment_id !== null) {
    const filters: VoterFilters = await segmentFilters(trx, ws, campaign.segment_id);
    limitId = await voterIdLimit(trx, ws);
    total += await countSegmentAddresses(trx, ws, campaign.channel, filters, limitId);
    total -= await segmentOverlap(trx, ws, campaign.channel, filters, limitId, recipients);
  }
  const cost = total * campaign.unit_cost;
  const queued = await updateCampaign(trx, ws, campaign.id, ['draft', 'scheduled'], {
    status: 'queued',
    total_recipients: total,
    reserved_credits: cost,
    voter_id_limit: limitId,
    updated_at: now,
  });
  if (!queued) throw new AppError('conflict', 'The campaign was sent or cancelled meanwhile.');
  const credit = creditChannel(campaign.channel);
  if (credit && !(await reserveCredits(trx, ws, credit, cost, campaignRef(campaign.id), now))) {
    throw insufficientCredits(credit, cost, (await balances(trx, ws))[credit]);
  }
  return queued;
}

/** The audit log's target and details of a campaign action. */
export function campaignAudit(campaign: CampaignRow) {
  const details = {
    channel: campaign.channel,
    status: campaign.status,
    recipients: campaign.total_recipients,
  };
  return { target: { type: 'campaign', id: campaignRef(campaign.id) }, details };
}
