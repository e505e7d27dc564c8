import type { Kysely } from 'kysely';
import type { CampaignRow, Database } from '../../db/schema.ts';
import { AppError, notFound } from '../../errors.ts';
import { type QuietHours, exemptFromQuietHours, quietUntil, RULED_CHANNELS } from '../../lib/quiet-hours.ts';
import { renderTemplate } from './render.ts';
import { findCampaign } from '../campaigns/campaigns.repository.ts';
import { creditChannel, unitCost } from '../messages/messages.rules.ts';
import { segmentFilters } from '../segments/segments.service.ts';
import {
  phonesInConstituencies,
  silencedConstituencies,
} from '../silence-periods/silence-periods.repository.ts';
import { findTemplate } from '../templates/templates.repository.ts';
import { optedOutAddresses } from '../opt-outs/opt-outs.repository.ts';
import { segmentConsentCounts } from './preview.repository.ts';
import { balances } from '../credits/credits.repository.ts';
import { campaignRef, isTemplateRef, parseRef, templateNumber } from '../../refs.ts';

const CHUNK = 500;

/**
 * What a draft or scheduled campaign would do if it went out at its time (now, or its scheduled_at): how
 * many recipients are skipped as opted out or in a silence period, how many quiet hours would hold and until
 * when, and the credits the rest would take. Nothing is written.
 */
export class CampaignPreview {
  constructor(private readonly deps: { db: Kysely<Database>; quietHours: QuietHours | undefined }) {}

  /**
   * `at`: the time to evaluate at (a "Send at" the office is typing, not yet saved); else the campaign's
   * scheduled_at when it has one in the future; else now.
   */
  async preview(workspaceId: number, ref: string, now: Date = new Date(), atGiven?: Date) {
    const { db } = this.deps;
    const id = parseRef('camp', ref);
    const campaign = id === undefined ? undefined : await findCampaign(db, workspaceId, id);
    if (!campaign) throw notFound('Campaign');
    if (campaign.status !== 'draft' && campaign.status !== 'scheduled') {
      throw new AppError(
        'conflict',
        `The campaign is ${campaign.status}; only a draft or scheduled one is previewed.`,
        {
          status: campaign.status,
        },
      );
    }
    const at =
      atGiven && atGiven > now
        ? atGiven
        : campaign.scheduled_at && new Date(campaign.scheduled_at) > now
          ? new Date(campaign.scheduled_at)
          : now;
    const ruled = RULED_CHANNELS.has(campaign.channel);
    const keys = ruled ? await silencedConstituencies(db, workspaceId, at.toISOString()) : [];
    const explicit = JSON.parse(campaign.recipients ?? '[]') as string[];
    let total = explicit.length;
    let optedOut = 0;
    let silenced = 0;
    let noAddress = 0;
    for (let i = 0; i < explicit.length; i += CHUNK) {
      const chunk = explicit.slice(i, i + CHUNK);
      const stopped = await optedOutAddresses(db, workspaceId, campaign.channel, chunk);
      optedOut += stopped.size;
      if (keys.length > 0) {
        const rest = chunk.filter((a) => !stopped.has(a));
        silenced += (await phonesInConstituencies(db, workspaceId, rest, keys)).size;
      }
    }
    if (campaign.segment_id !== null) {
      const filters = await segmentFilters(db, workspaceId, campaign.segment_id);
      const counts = await segmentConsentCounts(db, workspaceId, campaign.channel, filters, explicit, keys);
      total += counts.total;
      optedOut += counts.optedOut;
      silenced += counts.silenced;
      noAddress += counts.noAddress;
    }
    const going = total - optedOut - silenced;
    const heldUntil =
      ruled && !(await this.exempt(workspaceId, campaign)) ? quietUntil(this.deps.quietHours, at) : undefined;
    // Credits on the text as written (a template's variables are rendered empty; the worker trues up).
    const credit = creditChannel(campaign.channel);
    const text = isTemplateRef(campaign.template_id)
      ? renderTemplate(campaign.message, undefined)
      : campaign.message;
    return {
      campaign_id: campaignRef(campaign.id),
      channel: campaign.channel,
      evaluated_at: at.toISOString(),
      total_recipients: total,
      opted_out: optedOut,
      silence_period: silenced,
      skipped_no_address: noAddress,
      to_send: going,
      held: heldUntil ? going : 0,
      held_until: heldUntil?.toISOString() ?? null,
      estimated_credits: credit ? going * unitCost(campaign.channel, text) : 0,
      // What "Send" reserves at once (every recipient, at the campaign's cost a message; the skipped ones come
      // back as they are skipped), and what the workspace has: the preview is the send.
      credits_to_reserve: credit ? total * Math.max(campaign.unit_cost, unitCost(campaign.channel, text)) : 0,
      credits_available: credit ? (await balances(db, workspaceId))[credit] : null,
    };
  }

  private async exempt(workspaceId: number, campaign: CampaignRow): Promise<boolean> {
    if (!isTemplateRef(campaign.template_id)) return false;
    const template = await findTemplate(this.deps.db, workspaceId, templateNumber(campaign.template_id));
    return exemptFromQuietHours(template?.category);
  }
}
