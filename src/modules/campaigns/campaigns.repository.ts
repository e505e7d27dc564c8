import { type Insertable, sql, type Updateable } from 'kysely';
import { isPostgres } from '../../db/dialect.ts';
import type { CampaignRow, CampaignTable } from '../../db/schema.ts';
import type { CampaignStatus, MessageChannel, MessageErrorCode, MessageStatus } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';
import { filteredVoters, type VoterFilters, withPlaces } from '../voters/voters.search.ts';
import { workspacePage } from '../../db/paginate.ts';

export type Stats = Record<MessageStatus, number>;

export async function insertCampaign(
  db: Executor,
  workspaceId: number,
  values: Omit<Insertable<CampaignTable>, 'workspace_id'>,
): Promise<CampaignRow> {
  return db
    .insertInto('campaigns')
    .values({ ...values, workspace_id: workspaceId })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function findCampaign(
  db: Executor,
  workspaceId: number,
  id: number,
): Promise<CampaignRow | undefined> {
  return db
    .selectFrom('campaigns')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export function listCampaigns(db: Executor, workspaceId: number, page: number, perPage: number) {
  return workspacePage(db, 'campaigns', workspaceId, page, perPage, 'desc');
}

/** Message counts per status of each campaign, live from the outbox. */
export async function campaignStats(
  db: Executor,
  workspaceId: number,
  ids: number[],
): Promise<Map<number, Stats>> {
  const out = new Map<number, Stats>();
  if (ids.length === 0) return out;
  const rows = await db
    .selectFrom('messages')
    .select(['campaign_id', 'status', (eb) => eb.fn.countAll<number>().as('n')])
    .where('workspace_id', '=', workspaceId)
    .where('campaign_id', 'in', ids)
    .groupBy(['campaign_id', 'status'])
    .execute();
  for (const row of rows) {
    if (row.campaign_id === null) continue;
    const stats = out.get(row.campaign_id) ?? { queued: 0, sent: 0, delivered: 0, failed: 0 };
    stats[row.status] = Number(row.n);
    out.set(row.campaign_id, stats);
  }
  return out;
}

/** Moves a campaign from one of `from` statuses; false when another request or worker got there first. */
export async function updateCampaign(
  db: Executor,
  workspaceId: number,
  id: number,
  from: CampaignStatus[],
  values: Updateable<CampaignTable>,
): Promise<CampaignRow | undefined> {
  return db
    .updateTable('campaigns')
    .set(values)
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('status', 'in', from)
    .returningAll()
    .executeTakeFirst();
}

export function addressColumn(channel: MessageChannel) {
  return channel === 'email' ? ('voters.email' as const) : ('voters.phone' as const);
}

/** The highest voter id of the workspace now: voters added later are not part of a campaign counted now. */
export async function voterIdLimit(db: Executor, workspaceId: number): Promise<number> {
  const row = await db
    .selectFrom('voters')
    .select((eb) => eb.fn.max('id').as('max'))
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
  return Number(row?.max ?? 0);
}

/**
 * The segment's voters up to `limitId` with an address for the channel, counted in the database from an index.
 * A phone shared by several voters counts once per voter here (counting distinct addresses would sort a
 * million of them inside the request); filling the outbox deduplicates and the campaign is trued up then.
 */
export async function countSegmentAddresses(
  db: Executor,
  workspaceId: number,
  channel: MessageChannel,
  filters: VoterFilters,
  limitId: number,
): Promise<number> {
  // A voter from the roll may have no phone (migration 035): the address column is counted, not the rows.
  const query = filteredVoters(db, workspaceId, await withPlaces(db, workspaceId, filters)).where(
    'voters.id',
    '<=',
    limitId,
  );
  const counted = query.select((eb) => eb.fn.count(addressColumn(channel)).as('n'));
  const row = await counted.executeTakeFirst();
  return Number(row?.n ?? 0);
}

/** Which of `addresses` the segment also reaches (so they are counted once). */
export async function segmentOverlap(
  db: Executor,
  workspaceId: number,
  channel: MessageChannel,
  filters: VoterFilters,
  limitId: number,
  addresses: string[],
): Promise<number> {
  const column = addressColumn(channel);
  const placed = await withPlaces(db, workspaceId, filters);
  let overlap = 0;
  for (let i = 0; i < addresses.length; i += 500) {
    const chunk = addresses.slice(i, i + 500);
    const rows = await filteredVoters(db, workspaceId, placed)
      .where('voters.id', '<=', limitId)
      .where(column, 'in', chunk)
      .select(column)
      .distinct()
      .execute();
    overlap += rows.length;
  }
  return overlap;
}

// ---- The delivery worker's side: across workspaces, by campaign id. ----

/** Scheduled campaigns whose time has come. */
export async function dueScheduledCampaigns(
  db: Executor,
  now: string,
  limit: number,
): Promise<CampaignRow[]> {
  return db
    .selectFrom('campaigns')
    .selectAll()
    .where('status', '=', 'scheduled')
    .where('scheduled_at', '<=', now)
    .orderBy('scheduled_at')
    .limit(limit)
    .execute();
}

/**
 * Takes one queued campaign (credits reserved, outbox not yet filled) for filling, with a lease: a worker
 * that dies while filling leaves it to the next one once the lease ends.
 */
export async function claimQueuedCampaign(
  db: Executor,
  now: string,
  leaseUntil: string,
): Promise<CampaignRow | undefined> {
  return db
    .with(
      (cte) => cte('next').materialized(),
      (qb) => {
        const next = qb
          .selectFrom('campaigns')
          .select('id')
          .where('status', '=', 'queued')
          .where((w) => w.or([w('lease_until', 'is', null), w('lease_until', '<', now)]))
          .orderBy('id')
          .limit(1);
        return isPostgres(db) ? next.forUpdate().skipLocked() : next;
      },
    )
    .updateTable('campaigns')
    .set({ lease_until: leaseUntil, updated_at: now })
    .where('id', 'in', (eb) => eb.selectFrom('next').select('next.id'))
    .where('status', '=', 'queued')
    .returningAll()
    .executeTakeFirst();
}

const messageColumns = [
  'workspace_id',
  'campaign_id',
  'channel',
  'to',
  'body',
  'subject',
  'media_url',
  'template_id',
  'channel_account_id',
  'status',
  'cost',
  'attempts',
  'next_attempt_at',
  'created_at',
  'updated_at',
] as const;

/** The campaign's explicit recipients into the outbox; a recipient already there is skipped. */
export async function insertRecipientMessages(
  db: Executor,
  workspaceId: number,
  campaign: CampaignRow,
  addresses: string[],
  now: string,
  accountId: number | null,
): Promise<number> {
  let inserted = 0;
  for (let i = 0; i < addresses.length; i += 500) {
    const rows = addresses.slice(i, i + 500).map((to) => ({
      workspace_id: workspaceId,
      campaign_id: campaign.id,
      channel: campaign.channel,
      to,
      body: campaign.message,
      subject: campaign.subject,
      media_url: campaign.media_url,
      template_id: campaign.template_id,
      channel_account_id: accountId,
      status: 'queued' as const,
      cost: campaign.unit_cost,
      attempts: 0,
      next_attempt_at: now,
      created_at: now,
      updated_at: now,
    }));
    const result = await db
      .insertInto('messages')
      .values(rows)
      .onConflict((oc) => oc.columns(['campaign_id', 'to']).doNothing())
      .executeTakeFirst();
    inserted += Number(result.numInsertedOrUpdatedRows ?? 0);
  }
  return inserted;
}

/**
 * The segment's voters with ids in (afterId, upToId] into the outbox, as one INSERT ... SELECT in the
 * database. The campaign row supplies the message columns (typed, no casts); a recipient already in the
 * campaign (a shared phone, an explicit recipient, a repeated fill) is skipped by the unique index.
 */
export async function insertSegmentMessages(
  db: Executor,
  workspaceId: number,
  campaign: CampaignRow,
  filters: VoterFilters,
  afterId: number,
  upToId: number,
  accountId: number | null,
): Promise<number> {
  const column = addressColumn(campaign.channel);
  const placed = await withPlaces(db, workspaceId, filters);
  const select = filteredVoters(db, workspaceId, placed, { after: afterId, upTo: upToId })
    .crossJoin('campaigns')
    .where('campaigns.id', '=', campaign.id)
    .where(column, 'is not', null)
    .select([
      'campaigns.workspace_id',
      'campaigns.id',
      'campaigns.channel',
      sql<string>`${sql.ref(column)}`.as('to'),
      'campaigns.message',
      'campaigns.subject',
      'campaigns.media_url',
      'campaigns.template_id',
      sql<number | null>`CAST(${accountId} AS bigint)`.as('channel_account_id'),
      sql<string>`'queued'`.as('status'),
      'campaigns.unit_cost',
      sql<number>`0`.as('attempts'),
      'campaigns.started_at',
      'campaigns.started_at as created',
      'campaigns.started_at as updated',
    ]);
  const result = await db
    .insertInto('messages')
    .columns([...messageColumns])
    .expression(select as never)
    .onConflict((oc) => oc.columns(['campaign_id', 'to']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0);
}

/** Campaigns still `sending` with nothing left queued are completed. */
export async function completeDrainedCampaigns(db: Executor, now: string): Promise<number> {
  const result = await db
    .updateTable('campaigns')
    .set({ status: 'completed', completed_at: now, updated_at: now })
    .where('status', '=', 'sending')
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('messages')
            .select(sql`1`.as('one'))
            .where('messages.status', '=', 'queued')
            .whereRef('messages.campaign_id', '=', 'campaigns.id'),
        ),
      ),
    )
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** The retry of a campaign (retry-failed) that is not cancelled, if any. */
export async function findRetryOf(
  db: Executor,
  workspaceId: number,
  campaignId: number,
): Promise<CampaignRow | undefined> {
  return db
    .selectFrom('campaigns')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('retry_of', '=', campaignId)
    .where('status', '<>', 'cancelled')
    .executeTakeFirst();
}

/** Distinct recipients of a campaign's messages that failed with one of `codes`, in message order. */
export async function failedRecipients(
  db: Executor,
  workspaceId: number,
  campaignId: number,
  codes: MessageErrorCode[],
): Promise<string[]> {
  const rows = await db
    .selectFrom('messages')
    .select('to')
    .where('workspace_id', '=', workspaceId)
    .where('campaign_id', '=', campaignId)
    .where('status', '=', 'failed')
    .where('error_code', 'in', codes)
    .groupBy('to')
    .orderBy((eb) => eb.fn.min('id'))
    .execute();
  return rows.map((r) => r.to);
}

/** Deletes a campaign still in one of `from` statuses (it has no messages yet); false when it moved on. */
export async function deleteCampaign(
  db: Executor,
  workspaceId: number,
  id: number,
  from: CampaignStatus[],
): Promise<boolean> {
  const result = await db
    .deleteFrom('campaigns')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('status', 'in', from)
    .executeTakeFirst();
  return Number(result.numDeletedRows) === 1;
}

/** The lowest voter id of the workspace (where a segment fill starts). */
export async function firstVoterId(db: Executor, workspaceId: number): Promise<number> {
  const row = await db
    .selectFrom('voters')
    .select((eb) => eb.fn.min('id').as('min'))
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
  return Number(row?.min ?? 1);
}

/** How many messages a campaign has in the outbox. */
export async function countCampaignMessages(
  db: Executor,
  workspaceId: number,
  campaignId: number,
): Promise<number> {
  const row = await db
    .selectFrom('messages')
    .select(sql<number>`count(*)`.as('n'))
    .where('workspace_id', '=', workspaceId)
    .where('campaign_id', '=', campaignId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** The ids of a campaign's `n` newest queued messages. */
export async function newestQueued(
  db: Executor,
  workspaceId: number,
  campaignId: number,
  n: number,
): Promise<number[]> {
  const rows = await db
    .selectFrom('messages')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('campaign_id', '=', campaignId)
    .where('status', '=', 'queued')
    .orderBy('id', 'desc')
    .limit(n)
    .execute();
  return rows.map((r) => r.id);
}

/** Keeps a failure of these campaigns' messages as their latest error (campaign items' `last_error`). */
export async function noteCampaignError(
  db: Executor,
  campaignIds: readonly number[],
  code: string,
  message: string,
  now: string,
): Promise<void> {
  if (campaignIds.length === 0) return;
  await db
    .updateTable('campaigns')
    .set({ last_error_code: code, last_error_message: message.slice(0, 500), last_error_at: now })
    .where('id', 'in', [...new Set(campaignIds)])
    .execute();
}

/**
 * For each campaign, the channel account of one of its messages (filled campaigns name their carrier there): 0
 * where it has none (the deployment's provider), null where it has no message yet.
 */
export function firstMessageAccounts(db: Executor, campaignIds: number[]) {
  return db
    .selectFrom('campaigns as c')
    .select((eb) => [
      'c.id',
      eb
        .selectFrom('messages as m')
        .select((m) => m.fn.coalesce('m.channel_account_id', m.lit(0)).as('account'))
        .whereRef('m.campaign_id', '=', 'c.id')
        .limit(1)
        .as('first_account'),
    ])
    .where('c.id', 'in', campaignIds)
    .execute();
}
