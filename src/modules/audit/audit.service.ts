import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { type FieldErrors, validationError } from '../../errors.ts';
import { pageResult } from '../../domain.ts';
import { type AuditAction, listAudit } from './audit.repository.ts';
import { auditView } from './audit.schemas.ts';
import { dateBounds } from '../../lib/dates.ts';

export interface AuditQueryInput {
  page: number;
  per_page: number;
  action?: AuditAction | undefined;
  actor_id?: number | undefined;
  date_from?: string | undefined;
  date_to?: string | undefined;
}

/** Reads the audit log. Writing is recordAudit's, in each action's transaction; nothing changes or deletes entries but the worker's retention. */
export class AuditService {
  constructor(private readonly deps: { db: Kysely<Database> }) {}

  async list(workspaceId: number, query: AuditQueryInput) {
    const errors: FieldErrors = {};
    const from = query.date_from !== undefined ? dateBounds(query.date_from) : undefined;
    const to = query.date_to !== undefined ? dateBounds(query.date_to) : undefined;
    const problem = 'must be an ISO 8601 date (2026-01-31) or date-time (2026-01-31T09:30:00Z).';
    if (query.date_from !== undefined && !from) errors.date_from = [problem];
    if (query.date_to !== undefined && !to) errors.date_to = [problem];
    if (from && to && from[0] >= to[1]) errors.date_to = ['must not be before date_from.'];
    if (Object.keys(errors).length > 0) throw validationError(errors);
    const { rows, total } = await listAudit(
      this.deps.db,
      workspaceId,
      { action: query.action, actorId: query.actor_id, from: from?.[0], before: to?.[1] },
      query.page,
      query.per_page,
    );
    return pageResult(rows.map(auditView), total, query.page, query.per_page);
  }
}
