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
  checkVoterFilters,
  filteredVoters,
  volunteerScope,
  type VoterFilters,
  type VoterScope,
} from './voters.search.ts';
import { listVoters } from './voters.list.ts';
import { checkVoter, type VoterField, type VoterValues } from './voters.rules.ts';
import {
  ageOf,
  checkRecord,
  checkTags,
  genders,
  householdKey,
  type RecordColumns,
  type RecordField,
} from './voter-record.rules.ts';
import { checkFieldValues, fieldDefs, sensitiveKeys } from './voter-fields.ts';
import { fieldValuesOf, setFieldValues, setTags, tagsOf } from './voter-record.repository.ts';
import { householdOf } from './voters.repository.ts';
import type { Executor } from '../../db/types.ts';
import { linkVoter } from '../conversations/conversations.thread.ts';
import { consentView, recordConsent } from './voter-consent.ts';

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
    ...recordView(row),
    consent: consentView(row),
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** The record as the API shows it (gender only ever one of `genders`: checkRecord reads M, F, T and Hindi into them). */
export type RecordView = {
  [F in RecordField]: F extends 'age'
    ? number | null
    : F extends 'gender'
      ? (typeof genders)[number] | null
      : RecordColumns[Exclude<F, 'age'>];
};

/**
 * The record's fields as the API shows them: age computed today, birth_date only when known. Written out, not
 * looped over recordFields: this runs on every voter read (a literal is one object shape, built at once); the
 * RecordView type lists the fields from db/schema.voters.ts, so a field added there is a type error here.
 */
export function recordView(row: VoterRow): RecordView {
  return {
    epic_number: row.epic_number,
    part_number: row.part_number,
    serial_number: row.serial_number,
    page_number: row.page_number,
    house_number: row.house_number,
    relation_name: row.relation_name,
    relation_type: row.relation_type,
    gender: row.gender as (typeof genders)[number] | null,
    name_local: row.name_local,
    language: row.language,
    birth_date: row.birth_date,
    age: ageOf(row.birth_date, row.birth_key),
    support_level: row.support_level,
  };
}

/** The input of a create or update: the base fields, the record's, tags and custom fields. */
export type VoterInput = Partial<Record<VoterField | RecordField, unknown>> & {
  tags?: unknown;
  fields?: unknown;
  consent?: 'given' | 'withdrawn';
};

const duplicate = () =>
  new AppError('conflict', 'A voter with this name and phone already exists in your workspace.', {
    fields: ['name', 'phone'],
  });
const duplicateEpic = () =>
  new AppError('conflict', 'Another voter of your workspace has this epic_number.', {
    fields: ['epic_number'],
  });
const duplicateSerial = () =>
  new AppError('conflict', 'Another voter of your workspace has this part_number and serial_number.', {
    fields: ['part_number', 'serial_number'],
  });

/** 409 when another voter holds the EPIC number or the (part, serial) pair. */
async function checkRollIdentity(
  db: Executor,
  workspaceId: number,
  values: Pick<VoterRow, 'epic_number' | 'part_number' | 'serial_number'>,
  self?: number,
): Promise<void> {
  if (values.epic_number) {
    const other = await db
      .selectFrom('voters')
      .select('id')
      .where('workspace_id', '=', workspaceId)
      .where('epic_number', '=', values.epic_number)
      .executeTakeFirst();
    if (other && other.id !== self) throw duplicateEpic();
  }
  if (values.part_number !== null && values.serial_number !== null) {
    const other = await db
      .selectFrom('voters')
      .select('id')
      .where('workspace_id', '=', workspaceId)
      .where('part_number', '=', values.part_number)
      .where('serial_number', '=', values.serial_number)
      .executeTakeFirst();
    if (other && other.id !== self) throw duplicateSerial();
  }
}

export class VotersService {
  constructor(private readonly deps: { db: Kysely<Database>; defaultCountry: string }) {}

  /** Every check of a create or update: 422 with every field's problem at once. */
  private async check(workspaceId: number, input: VoterInput, partial: boolean) {
    const base = checkVoter(input, { partial, defaultCountry: this.deps.defaultCountry });
    const record = checkRecord(input);
    const tags = checkTags(input.tags);
    const defs = input.fields !== undefined ? await fieldDefs(this.deps.db, workspaceId) : [];
    const fields = checkFieldValues(defs, input.fields);
    const errors = { ...base.errors, ...record.errors, ...tags.errors, ...fields.errors };
    if (Object.keys(errors).length > 0) throw validationError(errors);
    return { values: base.values, record: record.values, tags: tags.tags, fields: fields.values, defs };
  }

  /** A list's filters checked (voters.search.ts checkVoterFilters). */
  filters(workspaceId: number, raw: Record<string, unknown>, canSeeSensitive: boolean) {
    return checkVoterFilters(this.deps.db, workspaceId, raw, canSeeSensitive);
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

  async create(workspaceId: number, input: VoterInput, createdBy?: number) {
    const checked = await this.check(workspaceId, input, false);
    const values = checked.values as VoterValues;
    const key = nameKey(values.name);
    const { db } = this.deps;
    const record: Partial<RecordColumns> = checked.record;
    const roll = {
      epic_number: record.epic_number ?? null,
      part_number: record.part_number ?? null,
      serial_number: record.serial_number ?? null,
    };
    return db.transaction().execute(async (trx) => {
      if (await findVoterByIdentity(trx, workspaceId, values.phone, key)) throw duplicate();
      await checkRollIdentity(trx, workspaceId, roll);
      const now = nowIso();
      let row: VoterRow;
      try {
        row = await insertVoter(trx, {
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
          ...record,
          household_key: householdKey({
            part_number: roll.part_number,
            house_number: record.house_number ?? null,
            address: values.address ?? null,
          }),
          name_key: key,
          created_at: now,
          updated_at: now,
          created_by: createdBy ?? null,
        });
      } catch (error) {
        if (isUniqueViolation(error)) throw duplicate();
        throw error;
      }
      if (checked.tags) await setTags(trx, workspaceId, row.id, checked.tags);
      if (checked.fields.size > 0) await setFieldValues(trx, workspaceId, row.id, checked.fields);
      if (input.consent) await recordConsent(trx, workspaceId, { voterIds: [row.id] }, input.consent, 'api');
      // A contact who wrote in before they were on the roll: their conversation is linked now.
      await linkVoter(trx, workspaceId, row);
      return { id: row.id, name: row.name, phone: values.phone, created_at: row.created_at };
    });
  }

  async get(workspaceId: number, id: number, scope?: VoterScope, canSeeSensitive = true) {
    await this.inScope(workspaceId, id, scope);
    const { db } = this.deps;
    const row = await findVoter(db, workspaceId, id);
    if (!row) throw notFound('Voter');
    const defs = await fieldDefs(db, workspaceId);
    const hidden = canSeeSensitive ? undefined : sensitiveKeys(defs);
    const [tags, fields, household] = await Promise.all([
      tagsOf(db, workspaceId, [id]),
      fieldValuesOf(db, workspaceId, [id], defs, hidden),
      householdOf(db, workspaceId, row),
    ]);
    const view = { ...voterView(row), tags: tags.get(id) ?? [], fields: fields.get(id) ?? {}, household };
    if (!canSeeSensitive) delete (view as { support_level?: unknown }).support_level;
    return view;
  }

  async update(
    workspaceId: number,
    id: number,
    input: VoterInput,
    scope?: VoterScope,
    canSeeSensitive = true,
  ) {
    const checked = await this.check(workspaceId, input, true);
    const { values, record } = checked;
    await this.inScope(workspaceId, id, scope);
    const { db } = this.deps;
    return db.transaction().execute(async (trx) => {
      const current = await findVoter(trx, workspaceId, id);
      if (!current) throw notFound('Voter');
      const name = values.name ?? current.name;
      const phone = values.phone ?? current.phone;
      const key = nameKey(name);
      if ((values.name !== undefined || values.phone !== undefined) && phone !== null) {
        const other = await findVoterByIdentity(trx, workspaceId, phone, key);
        if (other && other.id !== id) throw duplicate();
      }
      const merged = { ...current, ...values, ...record };
      if (
        record.epic_number !== undefined ||
        record.part_number !== undefined ||
        record.serial_number !== undefined
      )
        await checkRollIdentity(trx, workspaceId, merged, id);
      const patch = {
        ...values,
        ...record,
        ...(values.name !== undefined ? { name_key: key } : {}),
        ...placeKeyColumns(values),
        household_key: householdKey(merged),
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
      if (input.consent) {
        await recordConsent(trx, workspaceId, { voterIds: [id] }, input.consent, 'api');
        row = (await findVoter(trx, workspaceId, id))!;
      }
      if (checked.tags) await setTags(trx, workspaceId, id, checked.tags);
      if (checked.fields.size > 0) await setFieldValues(trx, workspaceId, id, checked.fields);
      if (values.phone !== undefined || values.email !== undefined) await linkVoter(trx, workspaceId, row);
      const changed: Record<string, unknown> = {};
      for (const field of Object.keys(values) as VoterField[]) changed[field] = row[field];
      const shown = recordView(row);
      for (const field of Object.keys(input) as RecordField[]) {
        if (field === 'age' || field === 'birth_date') {
          changed.age = shown.age;
          changed.birth_date = shown.birth_date;
        } else if (field in shown) changed[field] = shown[field as keyof typeof shown];
      }
      if (input.consent) changed.consent = consentView(row);
      if (checked.tags) changed.tags = (await tagsOf(trx, workspaceId, [id])).get(id) ?? [];
      if (checked.fields.size > 0) {
        const hidden = canSeeSensitive ? undefined : sensitiveKeys(checked.defs);
        const all = (await fieldValuesOf(trx, workspaceId, [id], checked.defs, hidden)).get(id) ?? {};
        changed.fields = all;
      }
      if (!canSeeSensitive) delete changed.support_level;
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

  async list(
    workspaceId: number,
    filters: VoterFilters,
    page: number,
    perPage: number,
    canSeeSensitive = true,
  ) {
    const { db } = this.deps;
    const { rows, total, exact } = await listVoters(db, workspaceId, filters, page, perPage);
    const tags = await tagsOf(
      db,
      workspaceId,
      rows.map((r) => r.id),
    );
    const items = rows.map((r) => {
      const item = { ...r, tags: tags.get(r.id) ?? [] };
      if (!canSeeSensitive) delete (item as { support_level?: unknown }).support_level;
      return item;
    });
    return { ...pageResult(items, total, page, perPage), total_exact: exact };
  }
}
