import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import type { Database } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { notFound, validationError } from '../../errors.ts';
import { pageResult } from '../../domain.ts';
import { checkVoterFilters, type VoterFilters } from '../voters/voters.search.ts';
import { countVoters } from '../voters/voters.list.ts';
import {
  deleteSegment,
  findSegment,
  insertSegment,
  listSegments,
  type SegmentRow,
  updateSegment,
} from './segments.repository.ts';

function segmentView(row: SegmentRow) {
  return {
    id: row.id,
    name: row.name,
    filters: JSON.parse(row.filters) as VoterFilters,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export class SegmentsService {
  constructor(private readonly deps: { db: Kysely<Database> }) {}

  async create(workspaceId: number, input: { name: string; filters?: Record<string, unknown> | undefined }) {
    const name = input.name.trim();
    if (!name) throw validationError({ name: ['must not be empty.'] });
    const filters = await checkVoterFilters(this.deps.db, workspaceId, input.filters ?? {}, true, 'filters.');
    const now = nowIso();
    const row = await insertSegment(this.deps.db, {
      workspace_id: workspaceId,
      name,
      filters: JSON.stringify(filters),
      created_at: now,
      updated_at: now,
    });
    return {
      ...segmentView(row),
      voter_count: await countVoters(this.deps.db, workspaceId, filters),
    };
  }

  async get(workspaceId: number, id: number) {
    const row = await findSegment(this.deps.db, workspaceId, id);
    if (!row) throw notFound('Segment');
    const view = segmentView(row);
    return { ...view, voter_count: await countVoters(this.deps.db, workspaceId, view.filters) };
  }

  async list(workspaceId: number, page: number, perPage: number) {
    const { rows, total } = await listSegments(this.deps.db, workspaceId, page, perPage);
    return pageResult(rows.map(segmentView), total, page, perPage);
  }

  /** Changes the name and/or the filters (filters are replaced whole); campaigns evaluate them when sent. */
  async update(
    workspaceId: number,
    id: number,
    input: { name?: string | undefined; filters?: Record<string, unknown> | undefined },
  ) {
    const name = input.name?.trim();
    if (input.name !== undefined && !name) throw validationError({ name: ['must not be empty.'] });
    const filters =
      input.filters !== undefined
        ? await checkVoterFilters(this.deps.db, workspaceId, input.filters, true, 'filters.')
        : undefined;
    const row = await updateSegment(this.deps.db, workspaceId, id, {
      ...(name ? { name } : {}),
      ...(filters !== undefined ? { filters: JSON.stringify(filters) } : {}),
      updated_at: nowIso(),
    });
    if (!row) throw notFound('Segment');
    const view = segmentView(row);
    return { ...view, voter_count: await countVoters(this.deps.db, workspaceId, view.filters) };
  }

  async remove(workspaceId: number, id: number): Promise<void> {
    if (!(await deleteSegment(this.deps.db, workspaceId, id))) throw notFound('Segment');
  }
}

/** A segment's filters, for broadcasts and campaigns (404 when it is not the workspace's). */
export async function segmentFilters(db: Executor, workspaceId: number, id: number): Promise<VoterFilters> {
  const row = await findSegment(db, workspaceId, id);
  if (!row) throw notFound('Segment');
  return JSON.parse(row.filters) as VoterFilters;
}
