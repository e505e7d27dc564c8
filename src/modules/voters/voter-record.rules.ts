import type { FieldErrors } from '../../errors.ts';
import { placeKey, placeText } from '../../lib/place.ts';
import { type RecordValue, type VoterRecordColumn, voterRecordColumns } from '../../db/schema.voters.ts';

/**
 * The voter record an office keeps (the contract's fourth part): the roll's identifiers, the family, age,
 * language, support and tags. One set of checks for the API, the import and the filters.
 */

export const relationTypes = ['father', 'mother', 'husband', 'wife', 'other'] as const;
export const genders = ['male', 'female', 'third_gender'] as const;

/** The record's columns on `voters`, as stored: db/schema.voters.ts lists them, once. */
export const recordColumns = Object.keys(voterRecordColumns) as readonly VoterRecordColumn[];
export type RecordColumns = { [C in VoterRecordColumn]: RecordValue<C> };

/** The record's fields as the API names them: its columns, with `age` in birth_key's place (two inputs of one stored value). */
export type RecordField = Exclude<VoterRecordColumn, 'birth_key'> | 'age';
export const recordFields: readonly RecordField[] = recordColumns.map((c) => (c === 'birth_key' ? 'age' : c));

/** The record's columns that hold integers (part, serial and page numbers, support level). */
export const integerRecordColumns: readonly VoterRecordColumn[] = recordColumns.filter(
  (c) => voterRecordColumns[c] === 'integer',
);

export const TAGS_MAX = 50;
export const TAG_MAX_LENGTH = 40;

/**
 * An EPIC number: the current form (3 letters and 7 digits, ABC1234567), or an older form found on older rolls
 * (letters, digits, `/` and `-`, 6 to 20 characters with at least one digit, e.g. UP/74/381/354053); upper-cased
 * (contract, fifth part).
 */
const EPIC = /^(?=[^0-9]*[0-9])[A-Z0-9/-]{6,20}$/;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

const GENDER_WORDS: Record<string, (typeof genders)[number]> = {
  m: 'male',
  male: 'male',
  man: 'male',
  पुरुष: 'male',
  f: 'female',
  female: 'female',
  woman: 'female',
  महिला: 'female',
  स्त्री: 'female',
  t: 'third_gender',
  tg: 'third_gender',
  third_gender: 'third_gender',
  'third gender': 'third_gender',
  transgender: 'third_gender',
  other: 'third_gender',
  'तृतीय लिंग': 'third_gender',
};

const RELATION_WORDS: Record<string, (typeof relationTypes)[number]> = {
  f: 'father',
  father: 'father',
  पिता: 'father',
  m: 'mother',
  mother: 'mother',
  माता: 'mother',
  h: 'husband',
  husband: 'husband',
  पति: 'husband',
  w: 'wife',
  wife: 'wife',
  पत्नी: 'wife',
  o: 'other',
  other: 'other',
  अन्य: 'other',
};

/** Today's date in UTC, YYYY-MM-DD (`now`'s, when given). */
export function today(now?: Date): string {
  if (now) return now.toISOString().slice(0, 10);
  // Computed once a day: an import asks for it on every row with an age (a Date and its ISO string each time
  // were a tenth of a million-row file's checks).
  const day = Math.floor(Date.now() / DAY_MS);
  if (day !== todayCache.day) todayCache = { day, text: new Date(day * DAY_MS).toISOString().slice(0, 10) };
  return todayCache.text;
}

const DAY_MS = 86_400_000;
let todayCache = { day: Number.NaN, text: '' };

/** The age on `on` (YYYY-MM-DD) of a voter born on `birthKey`; a 1 January key is a year's estimate. */
export function ageOf(birthDate: string | null, birthKey: string | null, on = today()): number | null {
  if (birthDate) {
    const years = Number(on.slice(0, 4)) - Number(birthDate.slice(0, 4));
    return on.slice(5) < birthDate.slice(5) ? years - 1 : years;
  }
  if (birthKey) return Number(on.slice(0, 4)) - Number(birthKey.slice(0, 4));
  return null;
}

/** The birth_key bounds for an age range, as ageOf computes ages (see the migration 035). */
export function birthKeyRange(ageMin: number | undefined, ageMax: number | undefined, on = today()) {
  const year = Number(on.slice(0, 4));
  const md = on.slice(4); // -MM-DD
  const shift = (years: number) => `${String(year - years).padStart(4, '0')}${md}`;
  return {
    // age >= min: born on or before today, min years ago
    upTo: ageMin !== undefined ? shift(ageMin) : undefined,
    // age <= max: born after today, max + 1 years ago
    after: ageMax !== undefined ? shift(ageMax + 1) : undefined,
  };
}

function isRealDate(value: string): boolean {
  const m = DATE.exec(value);
  if (!m) return false;
  const date = new Date(`${value}T00:00:00Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().slice(0, 10) === value;
}

/** Text in one form: NFKC, invisible characters dropped, spaces collapsed, trimmed ('' is null). */
function textOf(value: unknown): string | null | undefined {
  if (value === null) return null;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (typeof value !== 'string') return undefined;
  const text = placeText(value);
  return text === '' ? null : text;
}

/** An integer given as a number or as digits; undefined when it is neither. */
function integerOf(value: unknown): number | null | undefined {
  if (value === null) return null;
  if (typeof value === 'number') return Number.isInteger(value) ? value : undefined;
  if (typeof value !== 'string') return undefined;
  const text = value.trim();
  if (text === '') return null;
  return /^\d{1,6}$/.test(text) ? Number(text) : undefined;
}

/** Characters (code points) in `value`; a string no longer than `max` UTF-16 units is not counted. */
const longerThan = (value: string, max: number) => value.length > max && [...value].length > max;

const ranges = { part_number: 9999, serial_number: 9999, page_number: 999, support_level: 5 } as const;
const integerFields = ['part_number', 'serial_number', 'page_number', 'support_level'] as const;
const limits = { house_number: 40, relation_name: 200, name_local: 200 } as const;
const textFields = ['house_number', 'relation_name', 'name_local'] as const;

/**
 * Checks and normalises the record fields present in `input` (undefined: not given; null or '': cleared).
 * `values` holds the stored columns for the fields given (age and birth_date both set birth_date and
 * birth_key).
 */
export function checkRecord(input: Partial<Record<RecordField, unknown>>): {
  values: Partial<RecordColumns>;
  errors: FieldErrors;
} {
  const values: Partial<RecordColumns> = {};
  const errors: FieldErrors = {};
  const fail = (field: string, message: string) => {
    (errors[field] ??= []).push(message);
  };
  const given = (field: RecordField) => input[field] !== undefined;

  if (given('epic_number')) checkEpic(input.epic_number, values, fail);
  for (const field of integerFields) {
    if (!given(field)) continue;
    const n = integerOf(input[field]);
    const max = ranges[field];
    if (n === null) values[field] = null;
    else if (n === undefined || n < 1 || n > max)
      fail(
        field,
        `must be a whole number from 1 to ${max}${field === 'support_level' ? ' (1 strong supporter, 5 strong opponent), or null' : ''}.`,
      );
    else values[field] = n;
  }
  for (const field of textFields) {
    if (!given(field)) continue;
    const text = textOf(input[field]);
    if (text === undefined) fail(field, 'must be a string.');
    else if (text !== null && longerThan(text, limits[field]))
      fail(field, `must be at most ${limits[field]} characters.`);
    else values[field] = text;
  }
  for (const [field, read] of Object.entries(wordFields) as [keyof typeof wordFields, WordField][]) {
    if (!given(field)) continue;
    const text = textOf(input[field]);
    if (text === null) values[field] = null;
    else {
      const word = typeof text === 'string' ? read.words[read.key(text)] : undefined;
      if (word) values[field] = word;
      else fail(field, read.problem);
    }
  }
  if (given('language')) {
    const text = textOf(input.language);
    if (text === null) values.language = null;
    else if (typeof text === 'string' && /^[a-z]{2}$/i.test(text)) values.language = text.toLowerCase();
    else fail('language', 'must be a two-letter ISO 639-1 code, e.g. hi or en.');
  }
  checkBirth(input, values, fail);
  return { values, errors };
}

type Fail = (field: string, message: string) => void;

function checkEpic(value: unknown, values: Partial<RecordColumns>, fail: Fail): void {
  const text = textOf(value);
  if (text === undefined) return fail('epic_number', 'must be a string.');
  if (text === null) {
    values.epic_number = null;
    return;
  }
  const epic = text.replace(/\s+/g, '').toUpperCase();
  if (EPIC.test(epic)) values.epic_number = epic;
  else
    fail(
      'epic_number',
      'must be an EPIC number: 3 letters and 7 digits (ABC1234567), or an older form of letters, digits, / and - (6 to 20 characters, e.g. UP/74/381/354053).',
    );
}

/** A field stored as one of a few words, read from the ways a roll writes them. */
interface WordField {
  words: Record<string, string>;
  key: (text: string) => string;
  problem: string;
}

const wordFields: Record<'relation_type' | 'gender', WordField> = {
  relation_type: {
    words: RELATION_WORDS,
    key: (text) => text.toLowerCase(),
    problem: `must be one of ${relationTypes.join(', ')}.`,
  },
  gender: {
    words: GENDER_WORDS,
    key: (text) => text.toLowerCase().replace(/-/g, ' '),
    problem: `must be one of ${genders.join(', ')} (or M, F, T; पुरुष, महिला, तृतीय लिंग).`,
  },
};

/**
 * A birth date or an age: a known birth date wins over an age given beside it (an export carries both; the age
 * is computed from it); either cleared clears both.
 */
function checkBirth(
  input: Partial<Record<RecordField, unknown>>,
  values: Partial<RecordColumns>,
  fail: Fail,
): void {
  if (input.birth_date !== undefined && input.birth_date !== null && input.birth_date !== '') {
    const text = textOf(input.birth_date);
    if (typeof text !== 'string' || !isRealDate(text))
      return fail('birth_date', 'must be a date, YYYY-MM-DD.');
    const age = ageOf(text, text, today())!;
    if (age < 18 || age > 120) return fail('birth_date', 'must make the voter 18 to 120 years old today.');
    values.birth_date = text;
    values.birth_key = text;
  } else if (input.age !== undefined && input.age !== null && input.age !== '') {
    const n = integerOf(input.age);
    if (n === undefined || n === null || n < 18 || n > 120)
      return fail('age', 'must be a whole number from 18 to 120.');
    values.birth_date = null;
    values.birth_key = `${Number(today().slice(0, 4)) - n}-01-01`;
  } else if (input.age !== undefined || input.birth_date !== undefined) {
    values.birth_date = null;
    values.birth_key = null;
  }
}

/** A tag as shown (the first-written form) and its key (what is compared). */
export interface Tag {
  label: string;
  key: string;
}

/**
 * Tags in the place-name normal form: each 1-40 characters, at most 50, one per key (the first written
 * wins). `field` names the error's field.
 */
export function checkTags(raw: unknown, field = 'tags'): { tags?: Tag[] | undefined; errors: FieldErrors } {
  const errors: FieldErrors = {};
  if (raw === undefined) return { errors };
  if (raw === null) return { tags: [], errors };
  const list = typeof raw === 'string' ? raw.split(';') : raw;
  if (!Array.isArray(list)) return { errors: { [field]: ['must be a list of strings.'] } };
  const tags: Tag[] = [];
  const seen = new Set<string>();
  for (const item of list) {
    if (typeof item !== 'string') return { errors: { [field]: ['must be a list of strings.'] } };
    const label = placeText(item);
    if (label === '') {
      if (typeof raw === 'string') continue; // "a;;b" in a file
      return { errors: { [field]: ['must not hold an empty tag.'] } };
    }
    if (/[,;]/.test(label))
      return {
        errors: {
          [field]: [
            `a tag must not contain , or ; ("${label.slice(0, 50)}"): they separate tags in filters and files.`,
          ],
        },
      };
    if (longerThan(label, TAG_MAX_LENGTH))
      return {
        errors: {
          [field]: [`each tag must be at most ${TAG_MAX_LENGTH} characters ("${label.slice(0, 50)}").`],
        },
      };
    const key = placeKey(label);
    if (seen.has(key)) continue;
    seen.add(key);
    tags.push({ label, key });
  }
  if (tags.length > TAGS_MAX) return { errors: { [field]: [`must hold at most ${TAGS_MAX} tags.`] } };
  return { tags, errors };
}

/** The household a voter belongs to: part and house number, or failing those the normalised address. */
export function householdKey(v: {
  part_number: number | null;
  house_number: string | null;
  address: string | null;
}): string | null {
  if (v.part_number !== null && v.house_number) return `p:${v.part_number}:${placeKey(v.house_number)}`;
  if (v.address) {
    const key = placeKey(v.address)
      .replace(/[.,;:]+/g, ' ')
      .replace(/\s+/g, ' ')
      .trim();
    return key ? `a:${key}` : null;
  }
  return null;
}
