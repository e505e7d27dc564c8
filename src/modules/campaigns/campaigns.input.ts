import type { Kysely } from 'kysely';
import type { Config } from '../../config.ts';
import type { CampaignRow, Database } from '../../db/schema.ts';
import type { CampaignStatus, MessageChannel } from '../../domain.ts';
import { AppError, type FieldErrors, validationError } from '../../errors.ts';
import { addressProblem, contentProblems, recipientAddress, unitCost } from '../messages/messages.rules.ts';
import { segmentFilters } from '../segments/segments.service.ts';

/** What a campaign's create, change and broadcast take, and the checks made on it before anything is written. */

export interface AudienceInput {
  channel: MessageChannel;
  /** Required unless template_id names a tpl_ template. */
  message?: string | undefined;
  recipients?: string[] | undefined;
  segment_id?: number | string | undefined;
  subject?: string | undefined;
  template_id?: string | undefined;
  media_url?: string | undefined;
  /** The channel account its messages go through (`cha_<n>`); default: the workspace's default when it goes out. */
  channel_account_id?: string | undefined;
}

export interface CampaignInput extends AudienceInput {
  name: string;
  scheduled_at?: string | undefined;
}

/** PATCH: every field optional; null clears an optional one (scheduled_at: null makes it a draft again). */
export interface CampaignPatch {
  name?: string | undefined;
  message?: string | undefined;
  recipients?: string[] | null | undefined;
  segment_id?: number | string | null | undefined;
  scheduled_at?: string | null | undefined;
  subject?: string | null | undefined;
  template_id?: string | null | undefined;
  media_url?: string | null | undefined;
  channel_account_id?: string | null | undefined;
}

/** Only these can be edited or deleted: nothing is counted, charged or queued yet. */
export const EDITABLE: CampaignStatus[] = ['draft', 'scheduled'];

/** Checks recipients (each valid for the channel; deduplicated), the segment and the content. */
export async function checkAudience(
  deps: { db: Kysely<Database>; config: Pick<Config, 'broadcastMaxRecipients' | 'defaultCountry'> },
  workspaceId: number,
  input: AudienceInput & { message: string },
  errors: FieldErrors,
): Promise<{ recipients: string[]; segmentId: number | null }> {
  const { config } = deps;
  const recipients: string[] = [];
  if (input.recipients !== undefined) {
    if (input.recipients.length > config.broadcastMaxRecipients) {
      errors.recipients = [`must have at most ${config.broadcastMaxRecipients} items.`];
    } else {
      const seen = new Set<string>();
      input.recipients.forEach((raw, i) => {
        const address = recipientAddress(input.channel, raw, config.defaultCountry);
        if (!address) errors[`recipients.${i}`] = [addressProblem(input.channel)];
        else if (!seen.has(address)) {
          seen.add(address);
          recipients.push(address);
        }
      });
    }
  }
  if (input.recipients === undefined && input.segment_id === undefined) {
    errors.recipients = ['is required unless segment_id is given.'];
  }
  contentProblems(input, errors);
  if (Object.keys(errors).length > 0) throw validationError(errors);
  let segmentId: number | null = null;
  if (input.segment_id !== undefined) {
    segmentId = Number(input.segment_id);
    await segmentFilters(deps.db, workspaceId, segmentId);
  }
  return { recipients, segmentId };
}

/** The columns of a campaign's row that its content and audience decide. */
export function campaignColumns(
  input: AudienceInput & { message: string },
  audience: { recipients: string[]; segmentId: number | null },
  now: string,
) {
  return {
    channel: input.channel,
    message: input.message,
    subject: input.subject ?? null,
    media_url: input.media_url ?? null,
    template_id: input.template_id ?? null,
    segment_id: audience.segmentId,
    recipients: audience.recipients.length > 0 ? JSON.stringify(audience.recipients) : null,
    unit_cost: unitCost(input.channel, input.message),
    total_recipients: 0,
    reserved_credits: 0,
    created_at: now,
    updated_at: now,
  };
}

export function editable(campaign: CampaignRow): void {
  if (!EDITABLE.includes(campaign.status)) {
    throw new AppError(
      'conflict',
      `The campaign is ${campaign.status}; only a draft or scheduled campaign can be changed or deleted.`,
      { status: campaign.status },
    );
  }
}

/** A future ISO 8601 date-time, normalised; adds to `errors` otherwise. */
export function futureTime(value: string | undefined, errors: FieldErrors): string | undefined {
  if (value === undefined) return undefined;
  const at = new Date(value);
  if (Number.isNaN(at.getTime())) errors.scheduled_at = ['must be an ISO 8601 date-time.'];
  else if (at.getTime() <= Date.now()) errors.scheduled_at = ['must be in the future.'];
  else return at.toISOString();
  return undefined;
}
