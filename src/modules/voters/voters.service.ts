import { placeKeyColumns } from '../../lib/place.ts';
import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { Database, VoterRow } from '../../db/schema.ts';
import { AppError, notFound, validationError } from '../../errors.ts';
import { pageResult } from '../../domain.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import {
  deleteVoter,
  findVoter,
  findVoterByIdentity,
  insertVoter,
  nameKey,
  updateVoter,
} from './voters.repository.ts';
import {
  filteredVoters,
  listVoters,
  volunteerScope,
  type VoterFilters,
  type VoterScope,
} from './voters.search.ts';
import { checkVoter, type VoterField, type VoterValues } from './voters.rules.ts';
import { linkVoter } from '../conversations/conversations.thread.ts';

export function voterView(row: VoterRow) {
  return {
    id: row.id,
    name: row.name,
    phone: row.phone,
    email: row.email,
    constituency: row.constituency,
    booth: row.booth,
    ward: row.ward,
    address: row.address,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

const duplicate = () =>
  new AppError('conflict', 'A voter with this name and phone already exists in your workspace.', {
    fields: ['name', 'phone'],
  });

export class VotersService {
  constructor(private readonly deps: { db: Kysely<Database>; defaultCountry: string }) {}

  private check(input: Partial<Record<VoterField, unknown>>, partial: boolean): Partial<VoterValues> {
    const { values, errors } = checkVoter(input, { partial, defaultCountry: this.deps.defaultCountry });
    if (Object.keys(errors).length > 0) throw validationError(errors);
    return values;
  }

  /** A volunteer's part of the roll; undefined for the other roles (the whole roll). */
  scopeOf(auth: { userId: number; workspaceId: number; role: string }): Promise<VoterScope | undefined> {
    return volunteerScope(this.deps.db, auth);
  }

  /** 404 unless the voter is in the scope (a volunteer's part of the roll). */
  private async inScope(workspaceId: number, id: number, scope: VoterScope | undefined): Promise<void> {
    if (!scope) return;
    const found = await filteredVoters(this.deps.db, workspaceId, { scope })
      .where('voters.id', '=', id)
      .select('voters.id')
      .executeTakeFirst();
    if (!found) throw notFound('Voter');
  }

  async create(workspaceId: number, input: Partial<Record<VoterField, unknown>>, createdBy?: number) {
    const values = this.check(input, false) as VoterValues;
    const key = nameKey(values.name);
    const { db } = this.deps;
    if (await findVoterByIdentity(db, workspaceId, values.phone, key)) throw duplicate();
    const now = nowIso();
    try {
      const row = await insertVoter(db, {
        workspace_id: workspaceId,
        ...values,
        email: values.email ?? null,
        constituency: values.constituency ?? null,
        booth: values.booth ?? null,
        ward: values.ward ?? null,
        ...placeKeyColumns({
          constituency: values.constituency ?? null,
          ward: values.ward ?? null,
          booth: values.booth ?? null,
        }),
        address: values.address ?? null,
        name_key: key,
        created_at: now,
        updated_at: now,
        created_by: createdBy ?? null,
      });
      // A contact who wrote in before they were on the roll: their conversation is linked now.
      await linkVoter(db, workspaceId, row);
      return { id: row.id, name: row.name, phone: row.phone, created_at: row.created_at };
    } catch (error) {
      if (isUniqueViolation(error)) throw duplicate();
      throw error;
    }
  }

  async get(workspaceId: number, id: number, scope?: VoterScope) {
    await this.inScope(workspaceId, id, scope);
    const row = await findVoter(this.deps.db, workspaceId, id);
    if (!row) throw notFound('Voter');
    return voterView(row);
  }

  async update(
    workspaceId: number,
    id: number,
    input: Partial<Record<VoterField, unknown>>,
    scope?: VoterScope,
  ) {
    const values = this.check(input, true);
    await this.inScope(workspaceId, id, scope);
    const { db } = this.deps;
    return db.transaction().execute(async (trx) => {
      const current = await findVoter(trx, workspaceId, id);
      if (!current) throw notFound('Voter');
      const name = values.name ?? current.name;
      const phone = values.phone ?? current.phone;
      const key = nameKey(name);
      if (values.name !== undefined || values.phone !== undefined) {
        const other = await findVoterByIdentity(trx, workspaceId, phone, key);
        if (other && other.id !== id) throw duplicate();
      }
      const patch = {
        ...values,
        ...(values.name !== undefined ? { name_key: key } : {}),
        ...placeKeyColumns(values),
        updated_at: nowIso(),
      };
      let row: VoterRow | undefined;
      try {
        row = await updateVoter(trx, workspaceId, id, patch);
      } catch (error) {
        if (isUniqueViolation(error)) throw duplicate();
        throw error;
      }
      if (!row) throw notFound('Voter');
      if (values.phone !== undefined || values.email !== undefined) await linkVoter(trx, workspaceId, row);
      const changed: Record<string, string | null> = {};
      for (const field of Object.keys(values) as VoterField[]) changed[field] = row[field];
      return { id: row.id, ...changed, updated_at: row.updated_at };
    });
  }

  async remove(workspaceId: number, id: number, actor: AuditActor): Promise<void> {
    await this.deps.db.transaction().execute(async (trx) => {
      if (!(await deleteVoter(trx, workspaceId, id))) throw notFound('Voter');
      // Who deleted which voter id; the voter's name and phone are gone with the row and not copied here.
      await recordAudit(trx, { workspaceId, actor, action: 'voter.deleted', target: { type: 'voter', id } });
    });
  }

  async list(workspaceId: number, filters: VoterFilters, page: number, perPage: number) {
    const { rows, total, exact } = await listVoters(this.deps.db, workspaceId, filters, page, perPage);
    return { ...pageResult(rows, total, page, perPage), total_exact: exact };
  }
}
