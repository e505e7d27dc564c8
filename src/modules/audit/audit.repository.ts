import { pageOf } from '../../db/paginate.ts';
import { deleteCreatedBefore } from '../../db/prune.ts';
import type { FastifyRequest } from 'fastify';
import { nowIso } from '../../db/connect.ts';
import type { AuditLogRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';

/** Every action the audit log records (contract, second part, "Team and access"). */
export const auditActions = [
  'user.created',
  'user.updated',
  'user.deactivated',
  'auth.password_changed',
  'auth.password_reset',
  /** An operator ended every session of a user (CLI revoke-tokens). */
  'auth.tokens_revoked',
  'voters.imported',
  'voters.exported',
  'voter.deleted',
  'broadcast.created',
  'campaign.sent',
  'campaign.cancelled',
  /** retry-failed: a new campaign to the original's failed recipients. */
  'campaign.retried',
  'webhook.created',
  'webhook.updated',
  'webhook.deleted',
  'payment.created',
  'opt_out.created',
  'opt_out.deleted',
  'silence_period.created',
  'silence_period.deleted',
  'channel_account.created',
  'channel_account.updated',
  'workspace.updated',
  'channel_account.deleted',
  'conversation.assigned',
  'conversation.closed',
  'quick_reply.created',
  'quick_reply.deleted',
  /** Places (the contract's fourth part). */
  'place.created',
  'place.updated',
  'place.deleted',
  /** The voter record (the contract's fourth part). */
  'voter_field.created',
  'voter_field.updated',
  'voter_field.deleted',
  'voters.tagged',
  'voters.exported_sensitive',
  /** A voter changed by the service (a survey's save_to: details name the survey). */
  'voter.updated',
  /** Surveys (the contract's fourth part). */
  'survey.created',
  'survey.updated',
  'survey.run',
  'survey.closed',
  /** A survey's responses exported with the answers that save to support_level or a sensitive field (fifth part). */
  'survey.exported_sensitive',
  /** A conversation linked to a voter of the roll (fifth part). */
  'conversation.linked',
  /** Personal data (the contract's fourth part): requests, the notice, exports, erasures and breaches. */
  'privacy_request.created',
  'privacy_request.completed',
  'privacy.erased',
  'privacy.exported',
  'privacy_notice.updated',
  'breach.recorded',
] as const;
export type AuditAction = (typeof auditActions)[number];

/** Who acted: a signed-in user (id), or the service itself (null: CLI, worker, a provider callback), and from where. */
export interface AuditActor {
  userId: number | null;
  ip: string | null;
}

/** The actor of a request: its signed-in user (if any) and client address. */
export function actorOf(request: FastifyRequest): AuditActor {
  return { userId: request.auth?.userId ?? null, ip: request.ip ?? null };
}

export interface AuditEntry {
  workspaceId: number;
  actor: AuditActor;
  action: AuditAction;
  target?: { type: string; id: string | number } | null;
  /** Stored as JSON; never put a secret or a voter's personal data here beyond what the action needs. */
  details?: Record<string, unknown> | null;
}

/**
 * Records one action. Call it with the transaction that makes the change, so the entry exists exactly when the
 * change does. The actor's name is copied from `users` at write time.
 */
export async function recordAudit(db: Executor, entry: AuditEntry): Promise<void> {
  await auditInsert(db, entry).execute();
}

/** Records many actions of one actor in one statement (a batch of visits), in the caller's transaction. */
export async function recordAudits(db: Executor, entries: AuditEntry[]): Promise<void> {
  if (entries.length === 0) return;
  const userId = entries[0]!.actor.userId;
  const name =
    userId === null
      ? null
      : ((await db.selectFrom('users').select('name').where('id', '=', userId).executeTakeFirst())?.name ??
        null);
  const now = nowIso();
  for (let i = 0; i < entries.length; i += 500)
    await db
      .insertInto('audit_log')
      .values(
        entries.slice(i, i + 500).map((entry) => ({
          workspace_id: entry.workspaceId,
          action: entry.action,
          actor_id: entry.actor.userId,
          actor_name: name,
          target_type: entry.target?.type ?? null,
          target_id: entry.target ? String(entry.target.id) : null,
          ip: entry.actor.ip ? entry.actor.ip.slice(0, 100) : null,
          details: entry.details ? JSON.stringify(entry.details) : null,
          created_at: now,
        })),
      )
      .execute();
}

/** The INSERT of an audit entry, to execute or to compile for a driver's own connection (the bulk import). */
export function auditInsert(db: Executor, entry: AuditEntry) {
  const { actor } = entry;
  return db.insertInto('audit_log').values((eb) => ({
    workspace_id: entry.workspaceId,
    action: entry.action,
    actor_id: actor.userId,
    actor_name:
      actor.userId === null
        ? null
        : eb.selectFrom('users').select('name').where('id', '=', actor.userId).limit(1),
    target_type: entry.target?.type ?? null,
    target_id: entry.target ? String(entry.target.id) : null,
    ip: actor.ip ? actor.ip.slice(0, 100) : null,
    details: entry.details ? JSON.stringify(entry.details) : null,
    created_at: nowIso(),
  }));
}

export interface AuditFilters {
  action?: AuditAction | undefined;
  actorId?: number | undefined;
  /** Inclusive lower bound (ISO 8601). */
  from?: string | undefined;
  /** Exclusive upper bound (ISO 8601). */
  before?: string | undefined;
}

/** One page of the workspace's audit log, newest first, and how many entries match. */
export async function listAudit(
  db: Executor,
  workspaceId: number,
  filters: AuditFilters,
  page: number,
  perPage: number,
): Promise<{ rows: AuditLogRow[]; total: number }> {
  let query = db.selectFrom('audit_log').where('workspace_id', '=', workspaceId);
  if (filters.action !== undefined) query = query.where('action', '=', filters.action);
  if (filters.actorId !== undefined) query = query.where('actor_id', '=', filters.actorId);
  if (filters.from !== undefined) query = query.where('created_at', '>=', filters.from);
  if (filters.before !== undefined) query = query.where('created_at', '<', filters.before);
  return pageOf(query, (q) => q.selectAll().orderBy('id', 'desc'), page, perPage);
}

/**
 * Deletes entries created before `cutoff` in bounded batches (see deleteCreatedBefore); the worker's next
 * round goes on with a backlog. Returns how many went.
 */
export function pruneAuditLog(
  db: Executor,
  cutoff: string,
  batchSize = 1000,
  maxBatches = 10,
): Promise<number> {
  return deleteCreatedBefore(db, 'audit_log', cutoff, batchSize, maxBatches);
}
