import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { type FieldErrors, validationError } from '../../errors.ts';
import { pageResult } from '../../http/schemas.ts';
import { type AuditAction, listAudit } from './audit.repository.ts';
import { auditView } from './audit.schemas.ts';

export interface AuditQueryInput {
  page: number;
  per_page: number;
  action?: AuditAction | undefined;
  actor_id?: number | undefined;
  date_from?: string | undefined;
  date_to?: string | undefined;
}

const DATE = /^\d{4}-\d{2}-\d{2}$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/;

const FIRST_MS = Date.parse('0001-01-01T00:00:00.000Z');
const LAST_MS = Date.parse('9999-12-31T23:59:59.999Z');
/**
 * A bound as the stored timestamps are written (and compared, as text): kept within years 0001-9999, since
 * toISOString writes a year past 9999 as `+010000-...`, which sorts before every real timestamp on SQLite,
 * and PostgreSQL refuses a year 0 or past 9999 as a timestamp (a 500, not an answer).
 */
const iso = (ms: number) => new Date(Math.min(Math.max(ms, FIRST_MS), LAST_MS)).toISOString();

/** An ISO 8601 date (a whole UTC day) or date-time as [start, end) bounds; undefined when malformed. */
function dateBounds(value: string): [string, string] | undefined {
  const text = value.trim();
  if (DATE.test(text)) {
    const start = new Date(`${text}T00:00:00.000Z`);
    if (Number.isNaN(start.getTime()) || start.toISOString().slice(0, 10) !== text) return undefined;
    return [iso(start.getTime()), iso(start.getTime() + 86_400_000)];
  }
  if (DATE_TIME.test(text)) {
    const at = new Date(text);
    if (Number.isNaN(at.getTime())) return undefined;
    return [iso(at.getTime()), iso(at.getTime() + 1)];
  }
  return undefined;
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
