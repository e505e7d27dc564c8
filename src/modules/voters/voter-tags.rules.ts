import type { VoterTagJobRow } from '../../db/schema.ts';
import type { Role } from '../../domain.ts';
import { AppError, type FieldErrors, validationError } from '../../errors.ts';
import { checkFieldValues, sensitiveKeys, type StoredValue, type VoterFieldDef } from './voter-fields.ts';
import { checkTags, type Tag } from './voter-record.rules.ts';

/** Bulk tagging's checks and views (voter-tags.ts runs the edits): pure, no query. */

/** `POST /api/voters/tags`'s body, as its schema lets it through. */
export interface TagBody {
  add?: unknown;
  remove?: unknown;
  set?: { language?: unknown; support_level?: unknown; fields?: unknown } | undefined;
  voter_ids?: number[] | undefined;
  filters?: Record<string, unknown> | undefined;
}

/** The values a bulk edit sets on every voter it reaches (contract, fifth part: `set`). */
export interface SetValues {
  language?: string | null;
  support_level?: number | null;
  fields?: Array<[string, StoredValue | null]>;
}

export interface TagChange {
  add: Tag[];
  remove: Tag[];
  set?: SetValues | undefined;
}

/**
 * A bulk edit's `set`, checked: `language` (a two-letter code, or null), `support_level` (1-5, or null; a politician's
 * or a manager's) and custom `fields` (a sensitive one a politician's only: 403 otherwise).
 */
export function checkSet(
  raw: TagBody['set'],
  defs: readonly VoterFieldDef[],
  role: Role,
): SetValues | undefined {
  if (raw === undefined) return undefined;
  const errors: FieldErrors = {};
  const set: SetValues = {};
  if (raw.language !== undefined) {
    if (raw.language === null) set.language = null;
    else if (typeof raw.language === 'string' && /^[a-z]{2}$/i.test(raw.language))
      set.language = raw.language.toLowerCase();
    else errors['set.language'] = ['must be a two-letter ISO 639-1 code, e.g. hi or en, or null.'];
  }
  if (raw.support_level !== undefined) {
    const level = raw.support_level;
    if (level === null || (Number.isInteger(level) && (level as number) >= 1 && (level as number) <= 5))
      set.support_level = level as number | null;
    else errors['set.support_level'] = ['must be a whole number from 1 (strong supporter) to 5, or null.'];
  }
  if (raw.fields !== undefined) {
    const checked = checkFieldValues(defs, raw.fields);
    for (const [field, messages] of Object.entries(checked.errors)) errors[`set.${field}`] = messages;
    set.fields = [...checked.values];
  }
  if (Object.keys(errors).length > 0) throw validationError(errors);
  const hidden = sensitiveKeys(defs);
  const sensitive = (set.fields ?? []).filter(([key]) => hidden.has(key)).map(([key]) => key);
  if (sensitive.length > 0 && role !== 'politician')
    throw new AppError(
      'forbidden',
      `Only a politician sets sensitive fields in bulk (${sensitive.map((k) => `fields.${k}`).join(', ')}).`,
    );
  if (Object.keys(set).length === 0 || (set.fields?.length === 0 && Object.keys(set).length === 1))
    throw validationError({ set: ['give language, support_level or fields to set.'] });
  return set;
}

export function checkChange(body: TagBody, set: SetValues | undefined): TagChange {
  const add = checkTags(body.add ?? [], 'add');
  const remove = checkTags(body.remove ?? [], 'remove');
  const errors = { ...add.errors, ...remove.errors };
  if (Object.keys(errors).length > 0) throw validationError(errors);
  const change = { add: add.tags ?? [], remove: remove.tags ?? [], set };
  if (change.add.length === 0 && change.remove.length === 0 && !set)
    throw validationError({ add: ['give tags to add or to remove, or values to set.'] });
  const both = change.add.find((t) => change.remove.some((r) => r.key === t.key));
  if (both) throw validationError({ remove: [`"${both.label}" is both added and removed.`] });
  if ((body.voter_ids === undefined) === (body.filters === undefined))
    throw validationError({ voter_ids: ['give voter_ids (up to 1,000) or filters, one of them.'] });
  return change;
}

/** A stored `set` as the API shows it: fields by key with their values. */
function setView(text: string | null) {
  if (!text) return null;
  const set = JSON.parse(text) as SetValues;
  return {
    ...(set.language !== undefined ? { language: set.language } : {}),
    ...(set.support_level !== undefined ? { support_level: set.support_level } : {}),
    ...(set.fields
      ? {
          fields: Object.fromEntries(
            set.fields.map(([key, v]) => [key, v === null ? null : (v.value_number ?? v.value_text)]),
          ),
        }
      : {}),
  };
}

export function tagJobView(row: VoterTagJobRow) {
  return {
    id: Number(row.id),
    status: row.status as 'queued' | 'running' | 'completed' | 'failed',
    total: Number(row.total),
    changed: Number(row.changed),
    add: JSON.parse(row.add_tags) as string[],
    remove: JSON.parse(row.remove_tags) as string[],
    set: setView(row.set_values),
    filters: JSON.parse(row.filters) as Record<string, unknown>,
    error: row.error,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** What an audit entry says of a change: the tags' labels and the keys set. */
export function labels(change: TagChange) {
  return {
    add: change.add.map((t) => t.label),
    remove: change.remove.map((t) => t.label),
    // The keys set, not their values: an audit entry holds no sensitive value.
    ...(change.set
      ? {
          set: [
            ...(change.set.language !== undefined ? ['language'] : []),
            ...(change.set.support_level !== undefined ? ['support_level'] : []),
            ...(change.set.fields ?? []).map(([key]) => `fields.${key}`),
          ],
        }
      : {}),
  };
}
