import type { Kysely } from 'kysely';
import { compiledOnce } from '../../db/compiled-once.ts';
import { nowIso } from '../../db/connect.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { Database } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { AppError, type FieldErrors, notFound, validationError } from '../../errors.ts';
import { placeText } from '../../lib/place.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';

/**
 * A workspace's custom voter fields (the contract's fourth part): `{ key, label, type, choices?, sensitive }`,
 * at most 100. Values live in `voter_field_values` (migration 035): text, dates, choices and booleans in
 * `value_text`, numbers in `value_number`, so equality and ranges are index seeks.
 */

export const fieldTypes = ['text', 'number', 'date', 'choice', 'boolean'] as const;
export type FieldType = (typeof fieldTypes)[number];
export const FIELDS_MAX = 100;
export const FIELD_TEXT_MAX = 500;
export const CHOICES_MAX = 100;

export interface VoterFieldDef {
  key: string;
  label: string;
  type: FieldType;
  choices: string[] | null;
  sensitive: boolean;
  created_at: string;
}

/** One stored value: `value_text` or `value_number` (the other null). */
export interface StoredValue {
  value_text: string | null;
  value_number: number | null;
}

export type FieldValue = string | number | boolean;

/** Read on every voter read: built and compiled once (db/compiled-once.ts). */
const fieldsOf = compiledOnce((db, workspaceId: number) =>
  db.selectFrom('voter_fields').selectAll().where('workspace_id', '=', workspaceId).orderBy('key'),
);

export async function fieldDefs(db: Executor, workspaceId: number): Promise<VoterFieldDef[]> {
  const rows = await fieldsOf.all(db, workspaceId);
  return rows.map((r) => ({
    key: r.key,
    label: r.label,
    type: r.type as FieldType,
    choices: r.choices ? (JSON.parse(r.choices) as string[]) : null,
    sensitive: Boolean(r.sensitive),
    created_at: r.created_at,
  }));
}

/** The keys of the workspace's sensitive fields. */
export function sensitiveKeys(defs: readonly VoterFieldDef[]): Set<string> {
  return new Set(defs.filter((d) => d.sensitive).map((d) => d.key));
}

const DATE = /^\d{4}-\d{2}-\d{2}$/;
const TRUE = new Set(['true', 'yes', 'y', '1', 'हाँ', 'हां']);
const FALSE = new Set(['false', 'no', 'n', '0', 'नहीं']);

/**
 * One value of a field, checked and stored; null clears it. `fromText` reads a CSV cell (numbers and
 * booleans arrive as text). Returns a message when the value does not fit.
 */
export function storedValue(def: VoterFieldDef, raw: unknown, fromText = false): StoredValue | null | string {
  if (raw === null || raw === '') return null;
  switch (def.type) {
    case 'number': {
      const n =
        typeof raw === 'number' ? raw : fromText && typeof raw === 'string' ? Number(raw.trim()) : NaN;
      if (typeof raw === 'string' && raw.trim() === '') return null;
      if (!Number.isFinite(n) || Math.abs(n) > 1e15) return 'must be a number.';
      return { value_text: null, value_number: n };
    }
    case 'boolean': {
      if (typeof raw === 'boolean') return { value_text: String(raw), value_number: null };
      if (fromText && typeof raw === 'string') {
        const word = raw.trim().toLowerCase();
        if (TRUE.has(word)) return { value_text: 'true', value_number: null };
        if (FALSE.has(word)) return { value_text: 'false', value_number: null };
      }
      return 'must be true or false.';
    }
    case 'date': {
      if (typeof raw !== 'string') return 'must be a date, YYYY-MM-DD.';
      const text = raw.trim();
      const date = new Date(`${text}T00:00:00Z`);
      if (!DATE.test(text) || Number.isNaN(date.getTime()) || date.toISOString().slice(0, 10) !== text)
        return 'must be a date, YYYY-MM-DD.';
      return { value_text: text, value_number: null };
    }
    case 'choice': {
      if (typeof raw !== 'string' && typeof raw !== 'number')
        return `must be one of: ${def.choices!.join(', ')}.`;
      const text = placeText(String(raw)).toLowerCase();
      const choice = def.choices!.find((c) => c.toLowerCase() === text);
      if (choice === undefined) return `must be one of: ${def.choices!.join(', ')}.`;
      return { value_text: choice, value_number: null };
    }
    default: {
      if (typeof raw !== 'string' && typeof raw !== 'number') return 'must be a string.';
      const text = placeText(String(raw));
      if (text === '') return null;
      if ([...text].length > FIELD_TEXT_MAX) return `must be at most ${FIELD_TEXT_MAX} characters.`;
      return { value_text: text, value_number: null };
    }
  }
}

/** A stored value as the API shows it. */
export function shownValue(def: Pick<VoterFieldDef, 'type'>, stored: StoredValue): FieldValue | null {
  if (def.type === 'number') return stored.value_number;
  if (def.type === 'boolean') return stored.value_text === null ? null : stored.value_text === 'true';
  return stored.value_text;
}

/** Each list of definitions' fields by key, made once per list (an import checks every row against one). */
const defsByKey = new WeakMap<readonly VoterFieldDef[], Map<string, VoterFieldDef>>();

/**
 * The `fields` object of a create, update or import row: each key a field of the workspace, each value of
 * its type (422 on `fields.<key>` otherwise). Returns the values to write, null for those to clear.
 */
export function checkFieldValues(
  defs: readonly VoterFieldDef[],
  raw: unknown,
  fromText = false,
): { values: Map<string, StoredValue | null>; errors: FieldErrors } {
  const values = new Map<string, StoredValue | null>();
  const errors: FieldErrors = {};
  if (raw === undefined) return { values, errors };
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    errors.fields = ['must be an object of custom field values, { "key": value }.'];
    return { values, errors };
  }
  let byKey = defsByKey.get(defs);
  if (!byKey) defsByKey.set(defs, (byKey = new Map(defs.map((d) => [d.key, d]))));
  for (const [key, value] of Object.entries(raw)) {
    const def = byKey.get(key);
    if (!def) {
      errors[`fields.${key}`] = ['is not a custom field of this workspace (see GET /api/voter-fields).'];
      continue;
    }
    const stored = storedValue(def, value, fromText);
    if (typeof stored === 'string') errors[`fields.${key}`] = [stored];
    else values.set(key, stored);
  }
  return { values, errors };
}

const KEY = /^[a-z0-9_]{1,40}$/;

export interface FieldInput {
  key?: string | undefined;
  label?: string | undefined;
  type?: FieldType | undefined;
  choices?: string[] | null | undefined;
  sensitive?: boolean | undefined;
}

function checkChoices(type: FieldType, choices: string[] | null | undefined, errors: FieldErrors) {
  if (type !== 'choice') {
    if (choices && choices.length > 0) errors.choices = ['are only for a field of type choice.'];
    return null;
  }
  if (!choices || choices.length === 0) {
    errors.choices = ['are required for a field of type choice: a list of 1 to 100 strings.'];
    return null;
  }
  const clean: string[] = [];
  const seen = new Set<string>();
  for (const c of choices) {
    const text = placeText(c);
    if (text === '' || [...text].length > 100) {
      errors.choices = ['each choice must be 1 to 100 characters.'];
      return null;
    }
    if (seen.has(text.toLowerCase())) {
      errors.choices = [`"${text}" is given twice.`];
      return null;
    }
    seen.add(text.toLowerCase());
    clean.push(text);
  }
  if (clean.length > CHOICES_MAX) errors.choices = [`must be at most ${CHOICES_MAX}.`];
  return clean;
}

export class VoterFieldsService {
  constructor(private readonly deps: { db: Kysely<Database> }) {}

  list(workspaceId: number) {
    return fieldDefs(this.deps.db, workspaceId);
  }

  async create(workspaceId: number, actor: AuditActor, input: FieldInput): Promise<VoterFieldDef> {
    const errors: FieldErrors = {};
    const key = input.key ?? '';
    if (!KEY.test(key)) errors.key = ['must be 1 to 40 of a-z, 0-9 and _, e.g. caste or ration_card.'];
    else if (/_(min|max)$/.test(key))
      errors.key = ['must not end in _min or _max: fields.<key>_min and _max are range filters.'];
    const label = placeText(input.label ?? '');
    if (!label) errors.label = ['must not be empty.'];
    const type = input.type!;
    const choices = checkChoices(type, input.choices, errors);
    if (Object.keys(errors).length > 0) throw validationError(errors);
    const { db } = this.deps;
    return db.transaction().execute(async (trx) => {
      const count = await trx
        .selectFrom('voter_fields')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('workspace_id', '=', workspaceId)
        .executeTakeFirstOrThrow();
      if (Number(count.n) >= FIELDS_MAX)
        throw new AppError(
          'conflict',
          `A workspace keeps at most ${FIELDS_MAX} custom fields; delete one first.`,
        );
      const created_at = nowIso();
      try {
        await trx
          .insertInto('voter_fields')
          .values({
            workspace_id: workspaceId,
            key,
            label,
            type,
            choices: choices ? JSON.stringify(choices) : null,
            sensitive: input.sensitive ? 1 : 0,
            created_at,
          })
          .execute();
      } catch (error) {
        if (isUniqueViolation(error))
          throw new AppError('conflict', `A custom field "${key}" already exists.`, { fields: ['key'] });
        throw error;
      }
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'voter_field.created',
        target: { type: 'voter_field', id: key },
        details: { type, sensitive: Boolean(input.sensitive) },
      });
      return { key, label, type, choices, sensitive: Boolean(input.sensitive), created_at };
    });
  }

  async update(
    workspaceId: number,
    actor: AuditActor,
    key: string,
    input: FieldInput,
  ): Promise<VoterFieldDef> {
    const { db } = this.deps;
    return db.transaction().execute(async (trx) => {
      const current = (await fieldDefs(trx, workspaceId)).find((d) => d.key === key);
      if (!current) throw notFound('Custom field');
      const errors: FieldErrors = {};
      const label = input.label !== undefined ? placeText(input.label) : current.label;
      if (!label) errors.label = ['must not be empty.'];
      let choices = current.choices;
      if (input.choices !== undefined) choices = checkChoices(current.type, input.choices, errors);
      if (Object.keys(errors).length > 0) throw validationError(errors);
      if (current.type === 'choice' && input.choices !== undefined) {
        // Values no longer among the choices would be values the field cannot hold: refused, not dropped.
        const used = await trx
          .selectFrom('voter_field_values')
          .select('value_text')
          .distinct()
          .where('workspace_id', '=', workspaceId)
          .where('field_key', '=', key)
          .where('value_text', 'is not', null) // the text values' index holds no nulls (migration 039)
          .limit(1000)
          .execute();
        const kept = new Set(choices!);
        const lost = used.map((u) => u.value_text).filter((v): v is string => v !== null && !kept.has(v));
        if (lost.length > 0)
          throw validationError({
            choices: [
              `voters hold ${lost
                .slice(0, 5)
                .map((l) => `"${l}"`)
                .join(', ')}: keep those choices.`,
            ],
          });
      }
      const sensitive = input.sensitive ?? current.sensitive;
      await trx
        .updateTable('voter_fields')
        .set({ label, choices: choices ? JSON.stringify(choices) : null, sensitive: sensitive ? 1 : 0 })
        .where('workspace_id', '=', workspaceId)
        .where('key', '=', key)
        .execute();
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'voter_field.updated',
        target: { type: 'voter_field', id: key },
        details: { sensitive },
      });
      return { ...current, label, choices, sensitive };
    });
  }

  /** Deletes the field and every voter's value of it. */
  async remove(workspaceId: number, actor: AuditActor, key: string): Promise<void> {
    await this.deps.db.transaction().execute(async (trx) => {
      const deleted = await trx
        .deleteFrom('voter_fields')
        .where('workspace_id', '=', workspaceId)
        .where('key', '=', key)
        .executeTakeFirst();
      if (Number(deleted.numDeletedRows) === 0) throw notFound('Custom field');
      // A value is text or a number: each kind found through its own column's index, which holds no nulls (039).
      for (const column of ['value_text', 'value_number'] as const)
        await trx
          .deleteFrom('voter_field_values')
          .where('workspace_id', '=', workspaceId)
          .where('field_key', '=', key)
          .where(column, 'is not', null)
          .execute();
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'voter_field.deleted',
        target: { type: 'voter_field', id: key },
      });
    });
  }
}
