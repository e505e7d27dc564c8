import type { Insertable, Updateable } from 'kysely';
import { isPostgres } from '../../db/dialect.ts';
import type { DeliveryStatus, WebhookDeliveryTable, WebhookRow, WebhookTable } from '../../db/schema.ts';
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
  const [rows, count] = await Promise.all([
    deliveryLog(db, workspaceId, webhookId)
      .select(logColumns)
      .orderBy('d.id', 'desc')
      .limit(perPage)
      .offset((page - 1) * perPage)
      .execute(),
    deliveryLog(db, workspaceId, webhookId)
      .select((eb) => eb.fn.countAll<number>().as('total'))
      .executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.total) };
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

/**
 * Claims up to `limit` due deliveries of enabled endpoints for `workerId` until `leaseUntil`: pending ones
 * whose time has come and that nobody holds, or whose holder's lease has run out (a crashed worker).
 * PostgreSQL skips rows another worker is claiming (FOR UPDATE SKIP LOCKED); SQLite has one writer.
 * `workspaceIds` limits the claim to those workspaces (a dedicated worker; tests sharing one database).
 */
export async function claimDueDeliveries(
  db: Executor,
  workerId: string,
  now: string,
  leaseUntil: string,
  limit: number,
  workspaceIds?: readonly number[],
): Promise<number[]> {
  const due = db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhooks as w', 'w.id', 'd.webhook_id')
    .select('d.id')
    .where('d.status', '=', 'pending')
    .where('d.next_attempt_at', '<=', now)
    .where((eb) => eb.or([eb('d.lease_until', 'is', null), eb('d.lease_until', '<', now)]))
    .where('w.disabled_at', 'is', null)
    .$if(workspaceIds !== undefined, (q) => q.where('d.workspace_id', 'in', [...(workspaceIds ?? []), 0]))
    .orderBy('d.next_attempt_at')
    .orderBy('d.id')
    .limit(limit)
    .$if(isPostgres(db), (q) => q.forUpdate('d').skipLocked());
  const rows = await db
    .updateTable('webhook_deliveries')
    .set({ claimed_by: workerId, lease_until: leaseUntil })
    .where('id', 'in', due)
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
