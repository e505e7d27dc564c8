// A campaign as the API shows it: its row, its live counts, and whether its messages are held now and why.
import type { Kysely } from 'kysely';
import type { Config } from '../../config.ts';
import type { CampaignRow, Database } from '../../db/schema.ts';
import type { MessageChannel } from '../../domain.ts';
import { defaultDeploymentProvider, isSimulated } from '../../providers/registry.ts';
import { accountsOfWorkspace } from '../channel-accounts/channel-accounts.repository.ts';
import { carrierAmong } from '../channel-accounts/channel-accounts.service.ts';
import { exemptFromQuietHours, quietUntil, RULED_CHANNELS } from '../../lib/quiet-hours.ts';
import { silenceInForceUntil } from '../silence-periods/silence-periods.repository.ts';
import { findTemplate } from '../templates/templates.repository.ts';
import { firstMessageAccounts, type Stats } from './campaigns.repository.ts';
import { accountRef, campaignRef, isTemplateRef, templateNumber } from '../../refs.ts';

function emptyStats(): Stats {
  return { queued: 0, sent: 0, delivered: 0, failed: 0 };
}

/** Why a campaign's messages are not going out now, and until when (campaign items' held_until, held_reason). */
export interface Held {
  held_until: string | null;
  held_reason: 'quiet_hours' | 'silence_period' | null;
}
const notHeld: Held = { held_until: null, held_reason: null };

/** What carries a campaign's messages (or would now, before they are filled). */
export interface CampaignCarrier {
  channel_account_id: string | null;
  provider: string;
  simulated: boolean;
}

export function campaignView(
  row: CampaignRow,
  counted: Stats | undefined,
  held: Held = notHeld,
  carrier?: CampaignCarrier,
) {
  const stats = { ...(counted ?? emptyStats()) };
  if (row.status === 'queued') {
    // Credits are reserved but the outbox is still being filled: what is not there yet is queued.
    stats.queued = Math.max(stats.queued, row.total_recipients - stats.sent - stats.delivered - stats.failed);
  }
  return {
    id: campaignRef(row.id),
    name: row.name,
    channel: row.channel,
    message: row.message,
    status: row.status,
    segment_id: row.segment_id,
    subject: row.subject,
    template_id: row.template_id,
    media_url: row.media_url,
    channel_account_id:
      carrier?.channel_account_id ??
      (row.channel_account_id !== null ? accountRef(row.channel_account_id) : null),
    provider: carrier?.provider ?? null,
    simulated: carrier?.simulated ?? false,
    last_error:
      row.last_error_code !== null && row.last_error_at !== null
        ? {
            error_code: row.last_error_code,
            error_message: row.last_error_message ?? '',
            at: row.last_error_at,
          }
        : null,
    total_recipients: row.total_recipients,
    stats,
    scheduled_at: row.scheduled_at,
    created_at: row.created_at,
    started_at: row.started_at,
    completed_at: row.completed_at,
    ...held,
  };
}

/**
 * Whether a queued or sending campaign's messages are held now, and until when: quiet hours first (the
 * delivery gate holds them, unless the template is a service or transactional one), then a silence period of
 * the workspace in force (messages to its constituencies' voters fail until it ends).
 */
export async function heldNow(
  deps: { db: Kysely<Database>; config: Pick<Config, 'quietHours'> },
  row: CampaignRow,
  at = new Date(),
  silence?: () => Promise<string | undefined>,
): Promise<Held> {
  if ((row.status !== 'queued' && row.status !== 'sending') || !RULED_CHANNELS.has(row.channel))
    return notHeld;
  const { db, config } = deps;
  const quiet = quietUntil(config.quietHours, at);
  if (quiet) {
    const template = isTemplateRef(row.template_id)
      ? await findTemplate(db, row.workspace_id, templateNumber(row.template_id))
      : undefined;
    if (!exemptFromQuietHours(template?.category))
      return { held_until: quiet.toISOString(), held_reason: 'quiet_hours' };
  }
  const until = await (silence ?? (() => silenceInForceUntil(db, row.workspace_id, at.toISOString())))();
  return until ? { held_until: until, held_reason: 'silence_period' } : notHeld;
}

/**
 * Campaigns of one workspace as items show them, in two queries whatever their number: the account of one
 * of each one's messages (filled campaigns name their carrier there), and the workspace's accounts (the carrier
 * of each channel now, for campaigns not filled yet).
 */
export async function campaignViews(
  db: Kysely<Database>,
  deployment: Partial<Record<MessageChannel, string>> | undefined,
  rows: CampaignRow[],
  stats: Map<number, Stats>,
  helds: Held[],
) {
  if (rows.length === 0) return [];
  const open = rows.filter((r) => r.channel_account_id === null).map((r) => r.id);
  const firsts = new Map<number, number | null>();
  if (open.length > 0) {
    const found = await firstMessageAccounts(db, open);
    for (const f of found)
      if (f.first_account !== null)
        firsts.set(Number(f.id), Number(f.first_account) === 0 ? null : Number(f.first_account));
  }
  const accounts = await accountsOfWorkspace(db, rows[0]!.workspace_id);
  const byId = new Map(accounts.map((a) => [Number(a.id), a]));
  return rows.map((row, i) => {
    let accountId = row.channel_account_id;
    let off = false;
    if (accountId === null) {
      // Filled: its messages name their carrier. Not yet: what carries the channel now.
      if (firsts.has(row.id)) accountId = firsts.get(row.id)!;
      else {
        const carrier = carrierAmong(accounts, row.channel);
        accountId = (carrier.account ?? carrier.off)?.id ?? null;
        off = carrier.off !== undefined;
      }
    }
    const account = accountId !== null ? byId.get(Number(accountId)) : undefined;
    off ||= account?.disabled_at != null;
    const provider = account?.provider ?? deployment?.[row.channel] ?? defaultDeploymentProvider;
    return campaignView(row, stats.get(row.id), helds[i]!, {
      channel_account_id: accountId !== null ? accountRef(accountId) : null,
      provider,
      simulated: isSimulated(provider) && !off,
    });
  });
}
