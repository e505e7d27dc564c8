import type { Kysely, Updateable } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import type { Database, GrievanceRow, GrievanceTable } from '../../db/schema.ts';
import type { GrievancePriority, GrievanceStatus } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';
import { type FieldErrors, notFound, validationError } from '../../errors.ts';
import { pageResult } from '../../domain.ts';
import { volunteerScope, type VoterScope } from '../voters/voters.search.ts';
import { toE164 } from '../../lib/phone.ts';
import { placeKey } from '../../lib/place.ts';
import { emitEvent } from '../webhooks/webhooks.events.ts';
import {
  findGrievance,
  grievanceInScope,
  type GrievanceFilters,
  insertGrievance,
  listGrievances,
  updateGrievance,
  userInWorkspace,
  voterInWorkspace,
} from './grievances.repository.ts';
import { grievanceLimits } from './grievances.schemas.ts';

const HOUR = 3600_000;
/** How long a grievance of each priority has before it is overdue, counted from created_at. */
export const dueAfterMs: Record<GrievancePriority, number> = {
  urgent: 24 * HOUR,
  high: 3 * 24 * HOUR,
  normal: 7 * 24 * HOUR,
  low: 14 * 24 * HOUR,
};

/** The lifecycle: open -> in_progress -> resolved -> closed, resolved -> open (reopen); closed is final. */
export const grievanceTransitions: Record<GrievanceStatus, readonly GrievanceStatus[]> = {
  open: ['in_progress'],
  in_progress: ['resolved'],
  resolved: ['closed', 'open'],
  closed: [],
};

export function dueAt(createdAt: string, priority: GrievancePriority): string {
  return new Date(new Date(createdAt).getTime() + dueAfterMs[priority]).toISOString();
}

export function grievanceView(row: GrievanceRow) {
  return {
    id: row.id,
    title: row.title,
    description: row.description,
    category: row.category,
    status: row.status,
    priority: row.priority,
    voter_id: row.voter_id,
    reporter_name: row.reporter_name,
    reporter_phone: row.reporter_phone,
    constituency: row.constituency,
    booth: row.booth,
    ward: row.ward,
    assigned_to: row.assigned_to,
    resolution_note: row.resolution_note,
    due_at: row.due_at,
    created_at: row.created_at,
    updated_at: row.updated_at,
    resolved_at: row.resolved_at,
  };
}

export interface GrievanceInput {
  title?: string | undefined;
  description?: string | null | undefined;
  category?: string | null | undefined;
  status?: GrievanceStatus | undefined;
  priority?: GrievancePriority | undefined;
  voter_id?: number | null | undefined;
  reporter_name?: string | null | undefined;
  reporter_phone?: string | null | undefined;
  constituency?: string | null | undefined;
  booth?: string | number | null | undefined;
  ward?: string | number | null | undefined;
  assigned_to?: number | null | undefined;
  resolution_note?: string | null | undefined;
}

/** Trimmed text; an empty optional value is null; a number (booth, ward) is kept as a string. */
function clean(value: string | number | null | undefined): string | null | undefined {
  if (value === undefined) return undefined;
  if (value === null) return null;
  const text = typeof value === 'number' ? String(value) : value.trim();
  return text === '' ? null : text;
}

export class GrievancesService {
  constructor(private readonly deps: { db: Kysely<Database>; defaultCountry: string }) {}

  /** The columns a create or update sets from the input's free fields, with the problems found. */
  private async values(trx: Executor, workspaceId: number, input: GrievanceInput) {
    const errors: FieldErrors = {};
    const values: Updateable<GrievanceTable> = {};
    if (input.title !== undefined) {
      const title = input.title.trim();
      if (!title) errors.title = ['must not be empty.'];
      else values.title = title;
    }
    for (const field of [
      'description',
      'category',
      'reporter_name',
      'booth',
      'ward',
      'resolution_note',
    ] as const) {
      const value = clean(input[field]);
      // A number sent for booth or ward is kept as text, which must fit as a string sent would have to.
      if ((field === 'booth' || field === 'ward') && value && value.length > grievanceLimits[field]) {
        errors[field] = [`must be at most ${grievanceLimits[field]} characters.`];
      } else if (value !== undefined) values[field] = value;
    }
    const constituency = clean(input.constituency);
    if (constituency !== undefined) {
      values.constituency = constituency;
      values.constituency_key = constituency ? placeKey(constituency) : null;
    }
    const phone = clean(input.reporter_phone);
    if (phone !== undefined) {
      const e164 = phone === null ? null : toE164(phone, this.deps.defaultCountry);
      if (e164 === undefined) {
        errors.reporter_phone = ['must be a valid phone number, e.g. +919812345678.'];
      } else values.reporter_phone = e164;
    }
    if (input.assigned_to !== undefined) {
      if (input.assigned_to !== null && !(await userInWorkspace(trx, workspaceId, input.assigned_to))) {
        errors.assigned_to = ['must be a user of your workspace.'];
      } else values.assigned_to = input.assigned_to;
    }
    if (input.voter_id !== undefined) {
      if (input.voter_id !== null && !(await voterInWorkspace(trx, workspaceId, input.voter_id))) {
        errors.voter_id = ['must be a voter of your workspace.'];
      } else values.voter_id = input.voter_id;
    }
    if (Object.keys(errors).length > 0) throw validationError(errors);
    return values;
  }

  /** `within` runs in the grievance's transaction, after it is written: what it throws undoes the grievance. */
  async create(
    workspaceId: number,
    input: GrievanceInput,
    within?: (trx: Executor, grievance: ReturnType<typeof grievanceView>) => Promise<void>,
    createdBy?: number,
  ) {
    return this.deps.db.transaction().execute(async (trx) => {
      const values = await this.values(trx, workspaceId, input);
      const now = nowIso();
      const priority = input.priority ?? 'normal';
      const row = await insertGrievance(trx, {
        description: null,
        category: null,
        voter_id: null,
        reporter_name: null,
        reporter_phone: null,
        constituency: null,
        constituency_key: null,
        booth: null,
        ward: null,
        assigned_to: null,
        resolution_note: null,
        ...values,
        title: values.title!,
        workspace_id: workspaceId,
        status: 'open',
        priority,
        due_at: dueAt(now, priority),
        created_at: now,
        updated_at: now,
        resolved_at: null,
        created_by: createdBy ?? null,
      });
      const view = grievanceView(row);
      await within?.(trx, view);
      await emitEvent(trx, workspaceId, 'grievance.created', view, now, { assignedTo: view.assigned_to });
      return view;
    });
  }

  /** A volunteer's scope (what they may read of the roll and its grievances); undefined for other roles. */
  scopeOf(auth: { userId: number; workspaceId: number; role: string }): Promise<VoterScope | undefined> {
    return volunteerScope(this.deps.db, auth);
  }

  async get(workspaceId: number, id: number, scope?: VoterScope) {
    if (scope && !(await grievanceInScope(this.deps.db, workspaceId, id, scope))) throw notFound('Grievance');
    const row = await findGrievance(this.deps.db, workspaceId, id);
    if (!row) throw notFound('Grievance');
    return grievanceView(row);
  }

  async update(workspaceId: number, id: number, input: GrievanceInput, scope?: VoterScope) {
    if (scope && !(await grievanceInScope(this.deps.db, workspaceId, id, scope))) throw notFound('Grievance');
    return this.deps.db.transaction().execute(async (trx) => {
      const current = await findGrievance(trx, workspaceId, id);
      if (!current) throw notFound('Grievance');
      const values = await this.values(trx, workspaceId, input);
      const now = nowIso();
      const status = input.status;
      const moves = status !== undefined && status !== current.status;
      if (moves && !grievanceTransitions[current.status].includes(status)) {
        const allowed = grievanceTransitions[current.status];
        throw validationError(
          {
            status: [
              allowed.length === 0
                ? `cannot change: the grievance is ${current.status}, which is final.`
                : `cannot move from ${current.status} to ${status}; allowed: ${allowed.join(', ')}.`,
            ],
          },
          `A grievance cannot move from ${current.status} to ${status}.`,
        );
      }
      const priority = input.priority;
      const row = await updateGrievance(trx, workspaceId, id, {
        ...values,
        ...(moves ? { status } : {}),
        ...(moves && status === 'resolved' ? { resolved_at: now } : {}),
        ...(moves && status === 'open' ? { resolved_at: null } : {}),
        ...(priority !== undefined && priority !== current.priority
          ? { priority, due_at: dueAt(current.created_at, priority) }
          : {}),
        updated_at: now,
      });
      if (!row) throw notFound('Grievance');
      const view = grievanceView(row);
      if (moves && status === 'resolved')
        await emitEvent(trx, workspaceId, 'grievance.resolved', view, now, { assignedTo: view.assigned_to });
      return view;
    });
  }

  async list(workspaceId: number, filters: GrievanceFilters, page: number, perPage: number) {
    const { rows, total } = await listGrievances(this.deps.db, workspaceId, filters, nowIso(), page, perPage);
    return pageResult(rows.map(grievanceView), total, page, perPage);
  }
}
