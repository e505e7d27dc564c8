import { pageOf } from '../../db/paginate.ts';
import { type Insertable, sql, type Updateable } from 'kysely';
import { isPostgres } from '../../db/dialect.ts';
import type { WebhookDeliveryTable, WebhookRow, WebhookTable } from '../../db/schema.ts';
import type { DeliveryStatus } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';
import { workspacePage } from '../../db/paginate.ts';

export async function insertWebhook(db: Executor, values: Insertable<WebhookTable>): Promise<WebhookRow> {
  return db.insertInto('webhooks').values(values).returningAll().executeTakeFirstOrThrow();
}

export async function findWebhook(
  db: Executor,
  workspaceId: number,
  id: number,
): Promise<WebhookRow | undefined> {
  return db
    .selectFrom('webhooks')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export function listWebhooks(db: Executor, workspaceId: number, page: number, perPage: number) {
  return workspacePage(db, 'webhooks', workspaceId, page, perPage);
}

export async function updateWebhook(
  db: Executor,
  workspaceId: number,
  id: number,
  values: Updateable<WebhookTable>,
): Promise<WebhookRow | undefined> {
  return db
    .updateTable('webhooks')
    .set(values)
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export async function deleteWebhook(db: Executor, workspaceId: number, id: number): Promise<boolean> {
  const result = await db
    .deleteFrom('webhooks')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(result.numDeletedRows) === 1;
}

/** The workspace's enabled endpoints with their subscriptions (JSON text), for fanning an event out. */
export async function enabledWebhooks(
  db: Executor,
  workspaceId: number,
): Promise<Pick<WebhookRow, 'id' | 'events'>[]> {
  return db
    .selectFrom('webhooks')
    .select(['id', 'events'])
    .where('workspace_id', '=', workspaceId)
    .where('disabled_at', 'is', null)
    .orderBy('id')
    .execute();
}

export async function insertEvent(
  db: Executor,
  workspaceId: number,
  type: string,
  payload: string,
  now: string,
): Promise<number> {
  const row = await db
    .insertInto('webhook_events')
    .values({ workspace_id: workspaceId, type, payload, created_at: now })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

export async function insertDeliveries(
  db: Executor,
  workspaceId: number,
  eventId: number,
  webhookIds: number[],
  now: string,
): Promise<number[]> {
  if (webhookIds.length === 0) return [];
  const rows = await db
    .insertInto('webhook_deliveries')
    .values(
      webhookIds.map((webhookId) => ({
        workspace_id: workspaceId,
        webhook_id: webhookId,
        event_id: eventId,
        status: 'pending' as const,
        attempts: 0,
        next_attempt_at: now,
        created_at: now,
        updated_at: now,
      })),
    )
    .returning('id')
    .execute();
  return rows.map((r) => r.id);
}

export interface DeliveryLogRow {
  id: number;
  event_id: number;
  event_type: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: string;
  last_attempt_at: string | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

function deliveryLog(db: Executor, workspaceId: number, webhookId: number) {
  return db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
    .where('d.workspace_id', '=', workspaceId)
    .where('d.webhook_id', '=', webhookId);
}

const logColumns = [
  'd.id',
  'd.event_id',
  'e.type as event_type',
  'd.status',
  'd.attempts',
  'd.next_attempt_at',
  'd.last_attempt_at',
  'd.last_status_code',
  'd.last_error',
  'd.created_at',
  'd.updated_at',
] as const;

/** The endpoint's delivery log, newest first. */
export async function listDeliveries(
  db: Executor,
  workspaceId: number,
  webhookId: number,
  page: number,
  perPage: number,
): Promise<{ rows: DeliveryLogRow[]; total: number }> {
  return pageOf(
    deliveryLog(db, workspaceId, webhookId),
    (q) => q.select(logColumns).orderBy('d.id', 'desc'),
    page,
    perPage,
  );
}

export async function findDelivery(
  db: Executor,
  workspaceId: number,
  webhookId: number,
  id: number,
): Promise<(DeliveryLogRow & { lease_until: string | null }) | undefined> {
  return deliveryLog(db, workspaceId, webhookId)
    .select([...logColumns, 'd.lease_until'])
    .where('d.id', '=', id)
    .executeTakeFirst();
}

/** Makes a delivery due now again (a manual retry); attempts keep counting. */
export async function requeueDelivery(
  db: Executor,
  workspaceId: number,
  id: number,
  now: string,
): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({ status: 'pending', next_attempt_at: now, claimed_by: null, lease_until: null, updated_at: now })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .execute();
}

// The delivery workers serve every workspace: the functions below select across workspaces by design
// (claiming), then act on each delivery by its workspace id and claim.

/** An endpoint with due deliveries nobody holds, and what is in flight to it and its workspace. */
export interface DueEndpoint {
  webhook_id: number;
  workspace_id: number;
  /** Due deliveries that nobody holds. */
  due: number;
  /** Deliveries held under a live lease (attempts in flight, by any worker). */
  held: number;
  /** The same for all of the workspace's endpoints. */
  workspace_held: number;
}

/**
 * Enabled endpoints, not paused by the circuit breaker, with due, unheld deliveries whose endpoint and
 * workspace are under their in-flight caps (counted across every worker from the live leases). The
 * workspaces holding the fewest slots come first (a workspace with nothing in flight before any that holds
 * some, whatever their backlogs), then those waiting longest. Each endpoint is one row, however many
 * deliveries it has waiting: one slow receiver's backlog cannot crowd the others out.
 */
export async function dueEndpoints(
  db: Executor,
  now: string,
  caps: { perEndpoint: number; perWorkspace: number },
  limit: number,
  workspaceIds?: readonly number[],
): Promise<DueEndpoint[]> {
  const only =
    workspaceIds === undefined
      ? sql``
      : sql`AND d.workspace_id IN (${sql.join([...workspaceIds, 0].map((id) => sql`${id}`))})`;
  const live = sql`d.lease_until IS NOT NULL AND d.lease_until >= ${now}`;
  const { rows } = await sql<DueEndpoint>`
    SELECT webhook_id, workspace_id, due, held, workspace_held FROM (
      SELECT d.webhook_id, d.workspace_id,
        SUM(CASE WHEN ${live} THEN 0 ELSE 1 END) AS due,
        SUM(CASE WHEN ${live} THEN 1 ELSE 0 END) AS held,
        SUM(SUM(CASE WHEN ${live} THEN 1 ELSE 0 END)) OVER (PARTITION BY d.workspace_id) AS workspace_held,
        MIN(CASE WHEN ${live} THEN NULL ELSE d.next_attempt_at END) AS oldest
      FROM webhook_deliveries d
      INNER JOIN webhooks w ON w.id = d.webhook_id
      WHERE d.status = 'pending' AND d.next_attempt_at <= ${now} AND w.disabled_at IS NULL
        AND (w.paused_until IS NULL OR w.paused_until <= ${now}) ${only}
      GROUP BY d.webhook_id, d.workspace_id
    ) endpoints
    WHERE due > 0 AND held < ${caps.perEndpoint} AND workspace_held < ${caps.perWorkspace}
    ORDER BY workspace_held, oldest, webhook_id
    LIMIT ${limit}`.execute(db);
  return rows.map((r) => ({
    webhook_id: Number(r.webhook_id),
    workspace_id: Number(r.workspace_id),
    due: Number(r.due),
    held: Number(r.held),
    workspace_held: Number(r.workspace_held),
  }));
}

/**
 * Claims up to `limit` of one endpoint's due, unheld deliveries, oldest first. The pick is a MATERIALIZED
 * CTE, evaluated once (an IN (subquery ... LIMIT) may be re-run by PostgreSQL and claim more than it
 * locked), with FOR UPDATE SKIP LOCKED on PostgreSQL; the UPDATE checks again that nobody holds the row.
 */
export async function claimEndpointDeliveries(
  db: Executor,
  workerId: string,
  workspaceId: number,
  webhookId: number,
  now: string,
  leaseUntil: string,
  limit: number,
): Promise<number[]> {
  const rows = await db
    .with(
      (cte) => cte('due').materialized(),
      (qb) =>
        qb
          .selectFrom('webhook_deliveries')
          .select('id')
          .where('workspace_id', '=', workspaceId)
          .where('webhook_id', '=', webhookId)
          .where('status', '=', 'pending')
          .where('next_attempt_at', '<=', now)
          .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<', now)]))
          .orderBy('next_attempt_at')
          .orderBy('id')
          .limit(limit)
          .$if(isPostgres(db), (q) => q.forUpdate().skipLocked()),
    )
    .updateTable('webhook_deliveries')
    .set({ claimed_by: workerId, lease_until: leaseUntil })
    .where('id', 'in', (eb) => eb.selectFrom('due').select('due.id'))
    .where('status', '=', 'pending')
    .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<', now)]))
    .returning('id')
    .execute();
  return rows.map((r) => r.id);
}

export interface ClaimedDelivery {
  id: number;
  workspace_id: number;
  webhook_id: number;
  event_id: number;
  attempts: number;
  event_type: string;
  payload: string;
  event_created_at: string;
  url: string;
  secret_encrypted: string;
}

export async function loadClaimed(db: Executor, workerId: string, ids: number[]): Promise<ClaimedDelivery[]> {
  if (ids.length === 0) return [];
  return db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
    .innerJoin('webhooks as w', 'w.id', 'd.webhook_id')
    .select([
      'd.id',
      'd.workspace_id',
      'd.webhook_id',
      'd.event_id',
      'd.attempts',
      'e.type as event_type',
      'e.payload',
      'e.created_at as event_created_at',
      'w.url',
      'w.secret_encrypted',
    ])
    .where('d.id', 'in', ids)
    .where('d.claimed_by', '=', workerId)
    .orderBy('d.id')
    .execute();
}

/** Writes an attempt's result and releases the claim, only if `workerId` still holds it. */
export async function recordAttempt(
  db: Executor,
  workspaceId: number,
  id: number,
  workerId: string,
  values: Pick<
    Updateable<WebhookDeliveryTable>,
    | 'status'
    | 'attempts'
    | 'next_attempt_at'
    | 'last_attempt_at'
    | 'last_status_code'
    | 'last_error'
    | 'updated_at'
  >,
): Promise<boolean> {
  const result = await db
    .updateTable('webhook_deliveries')
    .set({ ...values, claimed_by: null, lease_until: null })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('claimed_by', '=', workerId)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Gives back what a stopping worker still holds, so another picks it up without waiting for the lease. */
export async function releaseClaims(db: Executor, workerId: string): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({ claimed_by: null, lease_until: null })
    .where('claimed_by', '=', workerId)
    .execute();
}

/** Consecutive timeouts after which the circuit breaker pauses an endpoint, and its pauses (doubling). */
export const BREAKER_AFTER_TIMEOUTS = 3;
const BREAKER_PAUSE_MS = 30_000;
const BREAKER_MAX_PAUSE_MS = 30 * 60_000;

/**
 * The circuit breaker's count after an attempt. An answer (any status) closes it; an attempt that got no
 * answer in time counts, and from BREAKER_AFTER_TIMEOUTS in a row the endpoint is paused, 30 s then doubling
 * with each further timeout up to 30 min: its deliveries wait (their retries unspent) instead of each holding
 * a slot for the whole timeout. When the pause ends, the next attempts are the probe.
 */
export async function recordEndpointHealth(
  db: Executor,
  webhookId: number,
  timedOut: boolean,
  now: Date,
): Promise<{ pausedUntil: string | null }> {
  if (!timedOut) {
    await db
      .updateTable('webhooks')
      .set({ timeout_streak: 0, paused_until: null })
      .where('id', '=', webhookId)
      .where((eb) => eb.or([eb('timeout_streak', '>', 0), eb('paused_until', 'is not', null)]))
      .execute();
    return { pausedUntil: null };
  }
  const row = await db
    .updateTable('webhooks')
    .set((eb) => ({ timeout_streak: eb('timeout_streak', '+', 1) }))
    .where('id', '=', webhookId)
    .returning('timeout_streak')
    .executeTakeFirst();
  const streak = row?.timeout_streak ?? 0;
  if (streak < BREAKER_AFTER_TIMEOUTS) return { pausedUntil: null };
  const pause = Math.min(BREAKER_PAUSE_MS * 2 ** (streak - BREAKER_AFTER_TIMEOUTS), BREAKER_MAX_PAUSE_MS);
  const pausedUntil = new Date(now.getTime() + pause).toISOString();
  await db.updateTable('webhooks').set({ paused_until: pausedUntil }).where('id', '=', webhookId).execute();
  return { pausedUntil };
}
