import { type ExpressionBuilder, sql } from 'kysely';
import type { DialectName } from '../../db/connect.ts';
import { isPostgres } from '../../db/dialect.ts';
import type { Database, MessageRow } from '../../db/schema.ts';
import type { MessageChannel, MessageErrorCode } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';
import { endFailedSessions } from '../surveys/session-end.ts';

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
  /** Only this workspace's messages (claimDueFairly). */
  workspaceId?: number,
  /** Lanes busy sending: their messages are left for a later claim. */
  busy: BusyLanes = { accounts: [], deployment: false },
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
          .$if(workspaceId !== undefined, (q) => q.where('workspace_id', '=', workspaceId as number))
          .$if(busy.deployment, (q) => q.where('channel_account_id', 'is not', null))
          .$if(busy.accounts.length > 0, (q) =>
            q.where((eb) =>
              eb.or([
                eb('channel_account_id', 'is', null),
                eb('channel_account_id', 'not in', busy.accounts),
              ]),
            ),
          )
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
      handing_at: null,
    }))
    .where('id', 'in', (eb) => eb.selectFrom('due').select('due.id'))
    .where('status', '=', 'queued')
    .returningAll()
    .execute();
}

/** The delivery lanes busy sending (channel accounts by id, and the deployment's provider of the channel). */
export interface BusyLanes {
  accounts: readonly number[];
  deployment: boolean;
}

/** Workspaces served per claim of a lane: a batch is shared between at most this many. */
const FAIR_WORKSPACES = 16;

/**
 * A lane's claim shared between workspaces: the workspaces with due messages on the channel are found by a
 * loose index scan (one seek per workspace on messages_due_workspace_idx, starting after `after`, the last
 * workspace served, and wrapping round; ordered by channel and workspace so that PostgreSQL takes that index,
 * not the plain one on workspace_id that walks every message the workspace ever sent), the batch is split
 * evenly between them, and the claimed rows come back interleaved (one of each workspace in turn). A workspace's million-message broadcast therefore no longer
 * holds every other workspace's messages on that channel until it has drained. `last` is where the next scan
 * starts. The scan costs more than the claims on PostgreSQL while a drain leaves dead index entries behind
 * (it halved a 300,000-message drain when run for every claim), so the worker reuses its result (`known`) for
 * a second (DeliveryWorker.dueWorkspaces).
 */
export async function claimDueFairly(
  db: Executor,
  dialect: DialectName,
  workerId: string,
  now: string,
  leaseUntil: string,
  limit: number,
  channel: MessageChannel,
  after: number,
  /** The workspaces a recent scan found (the scan is skipped); undefined: scan. */
  known?: readonly number[],
  busy?: BusyLanes,
): Promise<{ rows: MessageRow[]; last: number; workspaces: readonly number[] }> {
  const next = (from: number, count: number) =>
    sql<{ id: number }>`
      WITH RECURSIVE ws(id, n) AS (
        SELECT (SELECT workspace_id FROM messages WHERE status = 'queued' AND channel = ${channel}
                AND workspace_id > ${from} AND next_attempt_at <= ${now} ORDER BY channel, workspace_id LIMIT 1), 1
        UNION ALL
        SELECT (SELECT workspace_id FROM messages WHERE status = 'queued' AND channel = ${channel}
                AND workspace_id > ws.id AND next_attempt_at <= ${now} ORDER BY channel, workspace_id LIMIT 1), ws.n + 1
        FROM ws WHERE ws.id IS NOT NULL AND ws.n < ${count}
      )
      SELECT id FROM ws WHERE id IS NOT NULL`
      .execute(db)
      .then((r) => r.rows.map((row) => Number(row.id)));
  let workspaces = known ?? (await next(after, FAIR_WORKSPACES));
  if (!known && workspaces.length < FAIR_WORKSPACES && after > 0) {
    const wrapped = await next(0, FAIR_WORKSPACES - workspaces.length);
    workspaces = [...workspaces, ...wrapped.filter((id) => id <= after)];
  }
  if (workspaces.length === 0) return { rows: [], last: 0, workspaces };
  const share = Math.ceil(limit / workspaces.length);
  const claims: MessageRow[][] = [];
  for (const workspaceId of workspaces) {
    claims.push(await claimDue(db, dialect, workerId, now, leaseUntil, share, channel, workspaceId, busy));
  }
  const rows: MessageRow[] = [];
  const longest = Math.max(...claims.map((c) => c.length));
  for (let i = 0; i < longest; i++) for (const claim of claims) if (i < claim.length) rows.push(claim[i]!);
  return { rows, last: workspaces[workspaces.length - 1]!, workspaces };
}

export interface Handover {
  id: number;
  provider: string;
  /** Null: the provider did not answer in time (it may have the message); `note` says so on the message. */
  providerMessageId: string | null;
  note?: string | undefined;
}

/**
 * queued -> sent for messages a provider accepted: one UPDATE ... FROM (VALUES ...) per batch, joining each
 * id to its provider message id.
 */
export async function markSent(db: Executor, handovers: Handover[], now: string): Promise<number> {
  if (handovers.length === 0) return 0;
  const rows = sql.join(
    handovers.map((h) => sql`(${h.id}, ${h.providerMessageId}, ${h.provider}, ${h.note ?? null})`),
  );
  const query = isPostgres(db)
    ? sql`UPDATE messages AS m SET status = 'sent', provider_message_id = v.pid, provider = v.provider,
        sent_at = ${now}, updated_at = ${now}, claimed_by = NULL, lease_until = NULL, error = v.note
        FROM (VALUES ${rows}) AS v(id, pid, provider, note)
        WHERE m.id = v.id::bigint AND m.status = 'queued'`
    : sql`UPDATE messages SET status = 'sent', provider_message_id = v.column2, provider = v.column3,
        sent_at = ${now}, updated_at = ${now}, claimed_by = NULL, lease_until = NULL, error = v.column4
        FROM (VALUES ${rows}) AS v
        WHERE messages.id = v.column1 AND messages.status = 'queued'`;
  const result = await query.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/**
 * Just before its provider call: the claimed messages among `ids` that are still queued and still this
 * worker's are marked as being handed over (`handing_at`), and returned. A message a cancel failed meanwhile is
 * not returned, and is not sent; one returned is the cancel's `in_flight` until its hand-over is recorded.
 */
export async function beginCalls(
  db: Executor,
  ids: readonly number[],
  workerId: string,
  now: string,
): Promise<Set<number>> {
  if (ids.length === 0) return new Set();
  const rows = await db
    .updateTable('messages')
    .set({ handing_at: now })
    .where('id', 'in', [...ids])
    .where('status', '=', 'queued')
    .where('claimed_by', '=', workerId)
    .returning('id')
    .execute();
  return new Set(rows.map((r) => Number(r.id)));
}

/**
 * Not yet handed over: a queued message, unless a worker is in its provider call (`handing_at`, under a live
 * lease). A cancel fails these (cancelQueued).
 */
const notInFlight = (now: string) => (w: ExpressionBuilder<Database, 'messages'>) =>
  w.or([w('handing_at', 'is', null), w('lease_until', 'is', null), w('lease_until', '<=', now)]);

/**
 * A cancel (a campaign's, or a survey run's: `where` picks its messages): every queued message not in a
 * provider call ends `failed` with `cancelled`, claimed ones included (the worker checks before each call:
 * beginCalls). Returns the rows that moved (to refund) and how many are in a call now (`in_flight`: they go).
 */
export async function cancelQueued(
  db: Executor,
  workspaceId: number,
  where: { campaignId: number } | { runId: number },
  reason: string,
  now: string,
): Promise<{ stopped: Settled[]; inFlight: number }> {
  const scope = (w: ExpressionBuilder<Database, 'messages'>) =>
    'campaignId' in where
      ? w('campaign_id', '=', where.campaignId)
      : w(
          'survey_response_id',
          'in',
          w.selectFrom('survey_responses').select('survey_responses.id').where('run_id', '=', where.runId),
        );
  const stopped = await db
    .updateTable('messages')
    .set({
      status: 'failed',
      error: reason,
      error_code: 'cancelled',
      failed_at: now,
      updated_at: now,
      claimed_by: null,
      handing_at: null,
    })
    .where('workspace_id', '=', workspaceId)
    .where(scope)
    .where('status', '=', 'queued')
    .where(notInFlight(now))
    .returningAll()
    .execute();
  const left = await db
    .selectFrom('messages')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('workspace_id', '=', workspaceId)
    .where(scope)
    .where('status', '=', 'queued')
    .executeTakeFirstOrThrow();
  return { stopped, inFlight: Number(left.n) };
}

/** Whether any queued message is due at `now` (DeliveryWorker.drain). */
export async function anyDue(db: Executor, now: string): Promise<boolean> {
  const row = await db
    .selectFrom('messages')
    .select('id')
    .where('status', '=', 'queued')
    .where('next_attempt_at', '<=', now)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** Extends this claimant's lease on a queued message; false when it no longer holds it (a worker took it). */
export async function renewClaim(
  db: Executor,
  id: number,
  claimedBy: string,
  leaseSeconds: number,
): Promise<boolean> {
  const until = new Date(Date.now() + leaseSeconds * 1000).toISOString();
  // A claim is due again at its lease's end (next_attempt_at): both move.
  const result = await db
    .updateTable('messages')
    .set({ lease_until: until, next_attempt_at: until })
    .where('id', '=', id)
    .where('status', '=', 'queued')
    .where('claimed_by', '=', claimedBy)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Messages handed over with no answer (no provider id) and no report since `cutoff`: at most `limit`. */
export async function unconfirmedBefore(db: Executor, cutoff: string, limit: number): Promise<number[]> {
  const rows = await db
    .selectFrom('messages')
    .select('id')
    .where('status', '=', 'sent')
    .where('provider_message_id', 'is', null)
    .where('sent_at', '<', cutoff)
    .orderBy('sent_at')
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map((r) => Number(r.id));
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
    .set({
      next_attempt_at: nextAttemptAt,
      claimed_by: null,
      lease_until: null,
      handing_at: null,
      error,
      updated_at: now,
    })
    .where('id', '=', id)
    .where('status', '=', 'queued')
    .where('claimed_by', '=', workerId)
    .execute();
}

/** A message that reached a final status: the whole row, for refunds and the message.* webhook events. */
export type Settled = MessageRow;

/**
 * queued | sent -> failed, with why. Returns the rows that moved (only those are refunded). A survey's question
 * or call that failed ends its session at once (endFailedSessions): no answer can come to it, and an open
 * session would hold the contact's channel until SURVEY_SESSION_HOURS and take their next message for an answer.
 */
export async function failMessages(
  db: Executor,
  ids: number[],
  error: string,
  code: MessageErrorCode,
  now: string,
): Promise<Settled[]> {
  if (ids.length === 0) return [];
  const moved = await db
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
  await endFailedSessions(db, moved, now);
  return moved;
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
      handing_at: null,
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
    .set({ claimed_by: null, lease_until: null, handing_at: null, next_attempt_at: now, updated_at: now })
    .where('claimed_by', '=', workerId)
    .where('status', '=', 'queued')
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}
