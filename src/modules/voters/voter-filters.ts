import type { ExpressionBuilder } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { AppError, type FieldErrors, validationError } from '../../errors.ts';
import { placeKey, placeText } from '../../lib/place.ts';
import { birthKeyRange, genders } from './voter-record.rules.ts';
import { type FieldValue, type StoredValue, storedValue, type VoterFieldDef } from './voter-fields.ts';

/**
 * The voter record's filters (the contract's fourth part), wherever voter filters are taken: the list, the
 * export, segments, campaigns and bulk tagging. `cleanRecordFilters` checks what a caller gave and returns
 * it in one form (numbers as numbers, lists as arrays, custom field values of their field's type), which is
 * what segments store and show; `recordConditions` turns that form into SQL.
 */
export interface RecordFilters {
  epic_number?: string | undefined;
  part_number?: number | undefined;
  serial_from?: number | undefined;
  serial_to?: number | undefined;
  page_number?: number | undefined;
  page_from?: number | undefined;
  page_to?: number | undefined;
  house_number?: string | undefined;
  gender?: (typeof genders)[number] | undefined;
  age_min?: number | undefined;
  age_max?: number | undefined;
  language?: string | undefined;
  support_level?: number[] | undefined;
  tags?: string[] | undefined;
  tags_any?: string[] | undefined;
  tags_none?: string[] | undefined;
  household_of?: number | undefined;
  /** `fields.<key>`, `fields.<key>_min`, `fields.<key>_max`. */
  [field: `fields.${string}`]: FieldValue | undefined;
}

const integerFilters = {
  part_number: [1, 9999],
  serial_from: [1, 9999],
  serial_to: [1, 9999],
  page_number: [1, 999],
  page_from: [1, 999],
  page_to: [1, 999],
  age_min: [0, 150],
  age_max: [0, 150],
  household_of: [1, Number.MAX_SAFE_INTEGER],
} as const;
const listFilters = ['tags', 'tags_any', 'tags_none'] as const;

function integer(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isInteger(value) ? value : undefined;
  if (typeof value === 'string' && /^\s*\d{1,16}\s*$/.test(value)) return Number(value);
  return undefined;
}

function list(value: unknown): string[] | undefined {
  const items = typeof value === 'string' ? value.split(',') : Array.isArray(value) ? value : undefined;
  if (!items) return undefined;
  const out: string[] = [];
  for (const item of items) {
    if (typeof item !== 'string' && typeof item !== 'number') return undefined;
    const text = placeText(String(item));
    if (text) out.push(text);
  }
  return out;
}

/** Whether `filters` names any of the record's filters. */
export function hasRecordFilters(filters: object): boolean {
  for (const key of Object.keys(filters)) {
    if (
      key.startsWith('fields.') ||
      key in integerFilters ||
      (listFilters as readonly string[]).includes(key)
    )
      return true;
    if (['epic_number', 'house_number', 'gender', 'language', 'support_level'].includes(key)) return true;
  }
  return false;
}

/** The custom field a `fields.<key>[_min|_max]` filter names, and how it compares. */
function fieldFilter(name: string, defs: ReadonlyMap<string, VoterFieldDef>) {
  const key = name.slice('fields.'.length);
  const m = /^(.*)_(min|max)$/.exec(key);
  const exact = m ? undefined : defs.get(key);
  if (exact) return { def: exact, op: 'eq' as const };
  const ranged = m ? defs.get(m[1]!) : undefined;
  if (ranged && m) return { def: ranged, op: m[2] as 'min' | 'max' };
  return undefined;
}

/**
 * The record's filters of `raw` checked and in one form; the other keys of `raw` are left to the caller.
 * 422 names each filter that does not fit. `canSeeSensitive` false (a volunteer): a filter on support_level
 * or a sensitive field is 403, since its answer would tell the values.
 */
export function cleanRecordFilters(
  raw: Record<string, unknown>,
  defs: readonly VoterFieldDef[],
  canSeeSensitive = true,
  /** Before each field of a 422 (`filters.` for a segment's or an export's filter object). */
  prefix = '',
): RecordFilters {
  const out: RecordFilters = {};
  const errors: FieldErrors = {};
  const fail = (field: string, message: string) => {
    errors[prefix + field] = [message];
  };
  const given = (key: string) => raw[key] !== undefined && raw[key] !== '';
  for (const [key, [min, max]] of Object.entries(integerFilters) as Array<
    [keyof typeof integerFilters, readonly [number, number]]
  >) {
    if (!given(key)) continue;
    const n = integer(raw[key]);
    if (n === undefined || n < min || n > max) fail(key, `must be a whole number from ${min} to ${max}.`);
    else out[key] = n;
  }
  if (given('epic_number')) {
    if (typeof raw.epic_number !== 'string') fail('epic_number', 'must be a string.');
    else out.epic_number = raw.epic_number.replace(/\s+/g, '').toUpperCase();
  }
  if (given('house_number')) {
    if (typeof raw.house_number !== 'string') fail('house_number', 'must be a string.');
    else out.house_number = placeText(raw.house_number);
  }
  if (given('gender')) {
    const g = typeof raw.gender === 'string' ? raw.gender.trim().toLowerCase() : '';
    if (!(genders as readonly string[]).includes(g)) fail('gender', `must be one of ${genders.join(', ')}.`);
    else out.gender = g as (typeof genders)[number];
  }
  if (given('language')) {
    const l = typeof raw.language === 'string' ? raw.language.trim().toLowerCase() : '';
    if (!/^[a-z]{2}$/.test(l)) fail('language', 'must be a two-letter ISO 639-1 code, e.g. hi.');
    else out.language = l;
  }
  if (given('support_level')) {
    const levels = list(raw.support_level)?.map((v) => integer(v));
    if (!levels || levels.length === 0 || levels.some((v) => v === undefined || v < 1 || v > 5))
      fail('support_level', 'must be a level from 1 to 5, or a comma list of them (e.g. 1,2).');
    else out.support_level = [...new Set(levels as number[])].sort();
  }
  for (const key of listFilters) {
    if (!given(key)) continue;
    const tags = list(raw[key]);
    if (!tags || tags.length === 0 || tags.length > 50 || tags.some((t) => [...t].length > 40))
      fail(key, 'must be a comma list of 1 to 50 tags, each at most 40 characters.');
    else out[key] = tags;
  }
  const sensitive = cleanFieldFilters(raw, defs, out, fail);
  if (out.serial_from !== undefined && out.serial_to !== undefined && out.serial_from > out.serial_to)
    fail('serial_to', 'must not be below serial_from.');
  if (out.page_from !== undefined && out.page_to !== undefined && out.page_from > out.page_to)
    fail('page_to', 'must not be below page_from.');
  if (out.age_min !== undefined && out.age_max !== undefined && out.age_min > out.age_max)
    fail('age_max', 'must not be below age_min.');
  if (Object.keys(errors).length > 0) throw validationError(errors);
  if (!canSeeSensitive && (sensitive || out.support_level))
    throw new AppError(
      'forbidden',
      'Filters on support_level and sensitive custom fields are for politicians and managers.',
    );
  return out;
}

/**
 * The custom-field filters of `raw` (`fields.<key>`, `fields.<key>_min`, `fields.<key>_max`) into `out`, each
 * read as its field stores it; problems go to `fail`. True when one names a sensitive field.
 */
function cleanFieldFilters(
  raw: Record<string, unknown>,
  defs: readonly VoterFieldDef[],
  out: RecordFilters,
  fail: (field: string, message: string) => void,
): boolean {
  const byKey = new Map(defs.map((d) => [d.key, d]));
  let sensitive = false;
  for (const [name, value] of Object.entries(raw)) {
    if (!name.startsWith('fields.') || value === undefined || value === '') continue;
    const found = fieldFilter(name, byKey);
    if (!found) {
      fail(name, 'names no custom field of this workspace (see GET /api/voter-fields).');
      continue;
    }
    const { def, op } = found;
    if (def.sensitive) sensitive = true;
    if (op !== 'eq' && def.type !== 'number' && def.type !== 'date') {
      fail(name, `_min and _max are for number and date fields; "${def.key}" is ${def.type}.`);
      continue;
    }
    const stored = storedValue(def, value, typeof value === 'string');
    if (stored === null || typeof stored === 'string') {
      fail(name, typeof stored === 'string' ? stored : 'must not be empty.');
      continue;
    }
    out[name as `fields.${string}`] =
      stored.value_number !== null
        ? stored.value_number
        : def.type === 'boolean'
          ? stored.value_text === 'true'
          : stored.value_text!;
  }
  return sensitive;
}

/** The stored value a cleaned custom-field filter compares with. */
function comparable(value: FieldValue): StoredValue {
  if (typeof value === 'number') return { value_text: null, value_number: value };
  return { value_text: String(value), value_number: null };
}

/** The SQL of the record's filters, for `voters` in `workspaceId`; [] when there are none. */
export function recordConditions(
  eb: ExpressionBuilder<Database, 'voters'>,
  workspaceId: number,
  f: RecordFilters,
) {
  const and = [];
  if (f.epic_number !== undefined) and.push(eb('voters.epic_number', '=', f.epic_number));
  if (f.part_number !== undefined) and.push(eb('voters.part_number', '=', f.part_number));
  if (f.serial_from !== undefined) and.push(eb('voters.serial_number', '>=', f.serial_from));
  if (f.serial_to !== undefined) and.push(eb('voters.serial_number', '<=', f.serial_to));
  if (f.page_number !== undefined) and.push(eb('voters.page_number', '=', f.page_number));
  if (f.page_from !== undefined) and.push(eb('voters.page_number', '>=', f.page_from));
  if (f.page_to !== undefined) and.push(eb('voters.page_number', '<=', f.page_to));
  if (f.house_number !== undefined)
    and.push(eb(eb.fn('lower', ['voters.house_number']), '=', f.house_number.toLowerCase()));
  if (f.gender !== undefined) and.push(eb('voters.gender', '=', f.gender));
  if (f.language !== undefined) and.push(eb('voters.language', '=', f.language));
  if (f.support_level !== undefined)
    and.push(
      f.support_level.length === 1
        ? eb('voters.support_level', '=', f.support_level[0]!)
        : eb('voters.support_level', 'in', f.support_level),
    );
  if (f.age_min !== undefined || f.age_max !== undefined) {
    const { upTo, after } = birthKeyRange(f.age_min, f.age_max);
    if (upTo !== undefined) and.push(eb('voters.birth_key', '<=', upTo));
    if (after !== undefined) and.push(eb('voters.birth_key', '>', after));
  }
  const tagged = (keys: string[]) =>
    eb
      .selectFrom('voter_tags')
      .select('voter_tags.voter_id')
      .where('voter_tags.workspace_id', '=', workspaceId)
      .where('voter_tags.tag_key', keys.length === 1 ? '=' : 'in', keys.length === 1 ? keys[0]! : keys);
  for (const tag of f.tags ?? []) and.push(eb('voters.id', 'in', tagged([placeKey(tag)])));
  if (f.tags_any) and.push(eb('voters.id', 'in', tagged(f.tags_any.map(placeKey))));
  if (f.tags_none) and.push(eb('voters.id', 'not in', tagged(f.tags_none.map(placeKey))));
  if (f.household_of !== undefined) {
    const household = eb
      .selectFrom('voters as h')
      .select('h.household_key')
      .where('h.workspace_id', '=', workspaceId)
      .where('h.id', '=', f.household_of);
    and.push(eb.or([eb('voters.household_key', '=', household), eb('voters.id', '=', f.household_of)]));
  }
  for (const [name, value] of Object.entries(f)) {
    if (!name.startsWith('fields.') || value === undefined) continue;
    // A field's key never ends in _min or _max (voter-fields.ts), so the suffix is always a range.
    const m = /^fields\.(.*?)(?:_(min|max))?$/.exec(name)!;
    const stored = comparable(value as FieldValue);
    const column = stored.value_number !== null ? 'value_number' : 'value_text';
    const op = m[2] === 'min' ? '>=' : m[2] === 'max' ? '<=' : '=';
    and.push(
      eb(
        'voters.id',
        'in',
        eb
          .selectFrom('voter_field_values')
          .select('voter_field_values.voter_id')
          .where('voter_field_values.workspace_id', '=', workspaceId)
          .where('voter_field_values.field_key', '=', m[1]!)
          .where(`voter_field_values.${column}`, op, stored.value_number ?? stored.value_text!),
      ),
    );
  }
  return and;
}
