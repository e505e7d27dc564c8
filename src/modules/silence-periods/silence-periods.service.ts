import { placeKey, placeText } from '../../lib/place.ts';
import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import type { Database, SilencePeriodRow } from '../../db/schema.ts';
import { type FieldErrors, notFound, validationError } from '../../errors.ts';
import { pageResult } from '../../domain.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import {
  deleteSilencePeriod,
  findSilencePeriod,
  insertSilencePeriod,
  listSilencePeriods,
} from './silence-periods.repository.ts';
import { instant } from '../../lib/dates.ts';

export interface CreateSilencePeriodInput {
  constituency: string;
  starts_at: string;
  ends_at: string;
  reason?: string | undefined;
}

/** How a constituency is matched (as voters.constituency_key and the voter filters): lib/place.ts. */
export const constituencyKey = placeKey;

export function silencePeriodItem(row: SilencePeriodRow) {
  return {
    id: row.id,
    constituency: row.constituency,
    starts_at: row.starts_at,
    ends_at: row.ends_at,
    reason: row.reason,
    created_at: row.created_at,
  };
}

/**
 * Election silence periods (section 126 of the Representation of the People Act: no bulk SMS or calls to a
 * constituency in the 48 hours before its poll). The delivery gate enforces them at send time.
 */
export class SilencePeriodsService {
  constructor(private readonly deps: { db: Kysely<Database> }) {}

  async create(workspaceId: number, actor: AuditActor, input: CreateSilencePeriodInput) {
    const errors: FieldErrors = {};
    const constituency = placeText(input.constituency);
    if (constituency === '') errors.constituency = ['must not be empty.'];
    const problem = 'must be an ISO 8601 date-time with a time zone, e.g. 2026-12-01T17:00:00+05:30.';
    const startsAt = instant(input.starts_at);
    const endsAt = instant(input.ends_at);
    if (!startsAt) errors.starts_at = [problem];
    if (!endsAt) errors.ends_at = [problem];
    if (startsAt && endsAt && endsAt <= startsAt) errors.ends_at = ['must be after starts_at.'];
    if (Object.keys(errors).length > 0 || !startsAt || !endsAt) throw validationError(errors);
    return this.deps.db.transaction().execute(async (trx) => {
      const row = await insertSilencePeriod(trx, workspaceId, {
        constituency,
        constituency_key: constituencyKey(constituency),
        starts_at: startsAt,
        ends_at: endsAt,
        reason: input.reason?.trim() || null,
        created_at: nowIso(),
      });
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'silence_period.created',
        target: { type: 'silence_period', id: row.id },
        details: { constituency, starts_at: startsAt, ends_at: endsAt },
      });
      return silencePeriodItem(row);
    });
  }

  async list(
    workspaceId: number,
    query: { page: number; per_page: number; constituency?: string | undefined },
  ) {
    const { rows, total } = await listSilencePeriods(
      this.deps.db,
      workspaceId,
      { constituencyKey: query.constituency !== undefined ? constituencyKey(query.constituency) : undefined },
      query.page,
      query.per_page,
    );
    return pageResult(rows.map(silencePeriodItem), total, query.page, query.per_page);
  }

  async remove(workspaceId: number, actor: AuditActor, id: number): Promise<void> {
    await this.deps.db.transaction().execute(async (trx) => {
      const row = await findSilencePeriod(trx, workspaceId, id);
      if (!row || !(await deleteSilencePeriod(trx, workspaceId, id))) throw notFound('Silence period');
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'silence_period.deleted',
        target: { type: 'silence_period', id },
        details: { constituency: row.constituency },
      });
    });
  }
}
