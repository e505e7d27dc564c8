import { sql } from 'kysely';
import type { DialectName } from '../../db/connect.ts';
import { isPostgres } from '../../db/dialect.ts';
import type { MessageChannel, MessageErrorCode, MessageRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';

/**
 * The delivery worker's side of the outbox. These functions work on rows of every workspace by design (a
 * worker serves them all); they only ever touch the rows a claim returned, by id. Every status change is a
 * conditional UPDATE, so the lifecycle queued -> sent -> delivered | failed can only move forward, whoever
 * (worker, request, late callback) gets there first.
 */

/**
 * Claims up to `limit` due queued messages for `workerId` until `leaseUntil`. next_attempt_at moves to the
 * lease's end, so a claim whose worker died is due again once the lease expires. On PostgreSQL the rows are
 * picked with FOR UPDATE SKIP LOCKED: any number of workers claim disjoint batches without waiting.
 */
export async function claimDue(
  db: Executor,
  dialect: DialectName,
  workerId: string,
  now: string,
  leaseUntil: string,
  limit: number,
  /** Only this channel's messages (the worker's lane for it). */
  channel?: MessageChannel,
): Promise<MessageRow[]> {
  // The pick is a MATERIALIZED CTE: evaluated exactly once (an IN (subquery ... LIMIT) may be re-run by
  // PostgreSQL's planner and so claim more rows than it locked).
  return db
    .with(
      (cte) => cte('due').materialized(),
      (qb) => {
        const due = qb
          .selectFrom('messages')
          .select('id')
          .where('status', '=', 'queued')
          .where('next_attempt_at', '<=', now)
          .$if(channel !== undefined, (q) => q.where('channel', '=', channel as MessageChannel))
          .orderBy('next_attempt_at')
          .orderBy('id')
          .limit(limit);
        return dialect === 'postgres' ? due.forUpdate().skipLocked() : due;
      },
    )
    .updateTable('messages')
    .set((eb) => ({
      claimed_by: workerId,
      lease_until: leaseUntil,
      next_attempt_at: leaseUntil,
      attempts: eb('attempts', '+', 1),
      updated_at: now,
    }))
    .where('id', 'in', (eb) => eb.selectFrom('due').select('due.id'))
    .where('status', '=', 'queued')
    .returningAll()
    .execute();
}

export interface Handover {
  id: number;
  provider: string;
  providerMessageId: string;
}

/**
 * queued -> sent for messages a provider accepted: one UPDATE ... FROM (VALUES ...) per batch, joining each
 * id to its provider message id.
 */
export async function markSent(db: Executor, handovers: Handover[], now: string): Promise<number> {
  if (handovers.length === 0) return 0;
  const rows = sql.join(handovers.map((h) => sql`(${h.id}, ${h.providerMessageId}, ${h.provider})`));
  const query = isPostgres(db)
    ? sql`UPDATE messages AS m SET status = 'sent', provider_message_id = v.pid, provider = v.provider,
        sent_at = ${now}, updated_at = ${now}, claimed_by = NULL, lease_until = NULL, error = NULL
        FROM (VALUES ${rows}) AS v(id, pid, provider)
        WHERE m.id = v.id::bigint AND m.status = 'queued'`
    : sql`UPDATE messages SET status = 'sent', provider_message_id = v.column2, provider = v.column3,
        sent_at = ${now}, updated_at = ${now}, claimed_by = NULL, lease_until = NULL, error = NULL
        FROM (VALUES ${rows}) AS v
        WHERE messages.id = v.column1 AND messages.status = 'queued'`;
  const result = await query.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/** A retryable provider error: the message stays queued and is due again at `nextAttemptAt`. */
export async function scheduleRetry(
  db: Executor,
  id: number,
  workerId: string,
  nextAttemptAt: string,
  error: string,
  now: string,
): Promise<void> {
  await db
    .updateTable('messages')
    .set({ next_attempt_at: nextAttemptAt, claimed_by: null, lease_until: null, error, updated_at: now })
    .where('id', '=', id)
    .where('status', '=', 'queued')
    .where('claimed_by', '=', workerId)
    .execute();
}

/** A message that reached a final status: the whole row, for refunds and the message.* webhook events. */
export type Settled = MessageRow;

/** queued | sent -> failed, with why. Returns the rows that moved (only those are refunded). */
export async function failMessages(
  db: Executor,
  ids: number[],
  error: string,
  code: MessageErrorCode,
  now: string,
): Promise<Settled[]> {
  if (ids.length === 0) return [];
  return db
    .updateTable('messages')
    .set({
      status: 'failed',
      error: error.slice(0, 500),
      error_code: code,
      failed_at: now,
      updated_at: now,
      claimed_by: null,
    })
    .where('id', 'in', ids)
    .where('status', 'in', ['queued', 'sent'])
    .returningAll()
    .execute();
}

/** sent -> delivered. Returns the rows that moved. */
export async function deliverMessages(db: Executor, ids: number[], now: string): Promise<Settled[]> {
  if (ids.length === 0) return [];
  return db
    .updateTable('messages')
    .set({ status: 'delivered', delivered_at: now, updated_at: now })
    .where('id', 'in', ids)
    .where('status', '=', 'sent')
    .returningAll()
    .execute();
}

/** Sent messages of a provider that settles by age (the sandbox), sent at or before `cutoff`. */
export async function dueSettlements(
  db: Executor,
  channel: MessageChannel,
  provider: string,
  cutoff: string,
  limit: number,
): Promise<Array<{ id: number; to: string }>> {
  return db
    .selectFrom('messages')
    .select(['id', 'to'])
    .where('status', '=', 'sent')
    .where('sent_at', '<=', cutoff)
    .where('channel', '=', channel)
    .where('provider', '=', provider)
    .orderBy('sent_at')
    .orderBy('id')
    .limit(limit)
    .execute();
}

/**
 * Claimed messages a worker will not attempt now: due again at `dueAt` for any worker (at once when its provider
 * was too slow to reach them before the lease ends; at the end of quiet hours when held), and the claim's attempt
 * is not counted.
 */
export async function releaseUnsent(
  db: Executor,
  ids: readonly number[],
  workerId: string,
  now: string,
  dueAt: string = now,
): Promise<void> {
  if (ids.length === 0) return;
  await db
    .updateTable('messages')
    .set((eb) => ({
      claimed_by: null,
      lease_until: null,
      next_attempt_at: dueAt,
      attempts: eb('attempts', '-', 1),
      updated_at: now,
    }))
    .where('id', 'in', [...ids])
    .where('claimed_by', '=', workerId)
    .where('status', '=', 'queued')
    .execute();
}

/** At shutdown: this worker's unsent claims are due again at once, for whichever worker comes next. */
export async function releaseClaims(db: Executor, workerId: string, now: string): Promise<number> {
  const result = await db
    .updateTable('messages')
    .set({ claimed_by: null, lease_until: null, next_attempt_at: now, updated_at: now })
    .where('claimed_by', '=', workerId)
    .where('status', '=', 'queued')
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}
