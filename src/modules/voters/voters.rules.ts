import type { FieldErrors } from '../../errors.ts';
import { toE164 } from '../../lib/phone.ts';
import { placeText } from '../../lib/place.ts';

/** Field limits of the contract, shared by the HTTP schemas and the CSV import. */
export const voterLimits = {
  name: 200,
  email: 254,
  constituency: 120,
  booth: 20,
  ward: 20,
  address: 500,
} as const;

export const voterFields = ['name', 'phone', 'email', 'constituency', 'booth', 'ward', 'address'] as const;
export type VoterField = (typeof voterFields)[number];

export interface VoterValues {
  name: string;
  phone: string;
  email: string | null;
  constituency: string | null;
  booth: string | null;
  ward: string | null;
  address: string | null;
}

// The address check of ajv-formats' "email" format, so the API and the import agree.
const EMAIL =
  /^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;

const PHONE_MESSAGE =
  'must be a valid phone number, e.g. +919812345678 (a number without + is read in DEFAULT_COUNTRY).';

/**
 * A phone number in E.164. Indian mobiles, by far the commonest input, take a fast path that skips
 * libphonenumber (costly per call; a million-row import feels it); everything else goes through it.
 */
export function voterPhone(input: string, defaultCountry: string): string | undefined {
  const compact = input.replace(/[\s-]/g, '');
  if (/^\+91[6-9]\d{9}$/.test(compact)) return compact;
  if (defaultCountry === 'IN' && /^[6-9]\d{9}$/.test(compact)) return `+91${compact}`;
  return toE164(input, defaultCountry);
}

function text(value: unknown): string | null | undefined {
  if (value === undefined) return undefined;
  if (value === null) return null;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (typeof value !== 'string') return undefined;
  const trimmed = value.trim();
  return trimmed === '' ? null : trimmed;
}

/**
 * Checks and normalises the fields present in `input` (all of them for a create, any subset for an
 * update): trims, turns empty optional values into null, keeps numbers for booth and ward as strings,
 * reads phones into E.164. Returns the clean values and the problems by field.
 */
export function checkVoter(
  input: Partial<Record<VoterField, unknown>>,
  options: { partial: boolean; defaultCountry: string },
): { values: Partial<VoterValues>; errors: FieldErrors } {
  const values: Partial<VoterValues> = {};
  const errors: FieldErrors = {};
  const fail = (field: string, message: string) => {
    (errors[field] ??= []).push(message);
  };

  for (const field of voterFields) {
    const raw = input[field];
    if (raw === undefined) {
      if (!options.partial && (field === 'name' || field === 'phone')) fail(field, 'is required.');
      continue;
    }
    let value = text(raw);
    // Place names in one form (lib/place.ts): `North  Delhi` and `North\u00a0Delhi` are one constituency.
    if (value && (field === 'constituency' || field === 'booth' || field === 'ward')) {
      value = placeText(value) || null;
    }
    if (value === undefined) {
      fail(
        field,
        field === 'booth' || field === 'ward' ? 'must be a string or a number.' : 'must be a string.',
      );
      continue;
    }
    if (field === 'name' || field === 'phone') {
      if (value === null) {
        fail(field, 'must not be empty.');
        continue;
      }
      if (field === 'phone') {
        const phone = voterPhone(value, options.defaultCountry);
        if (phone) values.phone = phone;
        else fail('phone', PHONE_MESSAGE);
        continue;
      }
    }
    const limit = voterLimits[field as keyof typeof voterLimits];
    // Counted in characters (code points); a string no longer in UTF-16 units cannot be over.
    if (value !== null && value.length > limit && [...value].length > limit) {
      fail(field, `must be at most ${limit} characters.`);
      continue;
    }
    if (field === 'email' && value !== null && !EMAIL.test(value)) {
      fail('email', 'must be a valid email address.');
      continue;
    }
    (values as Record<string, string | null>)[field] = value;
  }
  return { values, errors };
}

/** Who may see sensitive data (support_level, sensitive custom fields): politicians and managers. */
export function seesSensitive(role: string): boolean {
  return role === 'politician' || role === 'manager';
}
