import { validationError } from '../../errors.ts';
import { type VoterField, voterFields } from '../voters/voters.rules.ts';
import { type RecordField, recordFields } from '../voters/voter-record.rules.ts';
import type { VoterFieldDef } from '../voters/voter-fields.ts';

/*
 * The file's headings: what each one fills (the office's mapping, the headings the import knows in English and
 * Hindi, the fallbacks), and checking a mapping the office sent.
 */

/** A heading of the file -> the field it fills (`name`, `epic_number`, `tags`, `field:<key>`), or `ignore`. */
export type ImportMapping = Readonly<Record<string, string>>;

/** A 422 about the file itself. */
export const fileError = (message: string) =>
  validationError({ file: [message] }, `The file cannot be imported: ${message}`);

/** Where each field is in the file, and the columns no field took. */
export interface FileColumns {
  base: [VoterField, number][];
  record: [RecordField, number][];
  tags: number | undefined;
  /** The consent column (given / withdrawn): recorded on the voter with source `import`. */
  consent: number | undefined;
  /** Custom fields: `field:<key>`. */
  custom: [string, number][];
  ignored: string[];
}

/**
 * Header names as they are compared: case-insensitive, spaces and underscores alike, dots dropped ("Sl. No."),
 * so `EPIC No`, `epic_no` and `Epic no.` are one name.
 */
export function headerName(name: string): string {
  return name
    .normalize('NFC')
    .trim()
    .toLowerCase()
    .replace(/\./g, '')
    .replace(/[\s_]+/g, ' ')
    .trim();
}

/** A column's field: the voter's, the record's, `tags`, or a custom field (`field:<key>`). */
type ColumnField = VoterField | RecordField | 'tags' | 'consent';

/**
 * The headings of Indian roll exports, in English and Hindi (the contract's fourth and fifth parts), and each
 * field's own name. Compared as headerName does.
 */
export const headerAliases: Record<string, ColumnField> = {
  epic: 'epic_number',
  'epic no': 'epic_number',
  'epic number': 'epic_number',
  'voter id': 'epic_number',
  'voter id no': 'epic_number',
  'ईपीआईसी संख्या': 'epic_number',
  'मतदाता पहचान पत्र संख्या': 'epic_number',
  'elector name': 'name',
  "elector's name": 'name',
  'name of elector': 'name',
  'voter name': 'name',
  'निर्वाचक का नाम': 'name',
  'मतदाता का नाम': 'name',
  नाम: 'name',
  mobile: 'phone',
  'mobile no': 'phone',
  'mobile number': 'phone',
  'phone no': 'phone',
  'phone number': 'phone',
  'contact no': 'phone',
  मोबाइल: 'phone',
  'मोबाइल नंबर': 'phone',
  'मोबाइल संख्या': 'phone',
  'फ़ोन नंबर': 'phone',
  'ac name': 'constituency',
  'assembly constituency': 'constituency',
  'constituency name': 'constituency',
  'विधानसभा क्षेत्र': 'constituency',
  विधानसभा: 'constituency',
  'ward no': 'ward',
  'ward name': 'ward',
  वार्ड: 'ward',
  'booth no': 'booth',
  'booth name': 'booth',
  'polling station': 'booth',
  'polling station name': 'booth',
  बूथ: 'booth',
  'मतदान केंद्र': 'booth',
  'part no': 'part_number',
  'part number': 'part_number',
  'भाग संख्या': 'part_number',
  'serial no': 'serial_number',
  'sl no': 'serial_number',
  'serial number': 'serial_number',
  'क्रम संख्या': 'serial_number',
  'page no': 'page_number',
  'page number': 'page_number',
  'पृष्ठ संख्या': 'page_number',
  'house no': 'house_number',
  'house number': 'house_number',
  'मकान संख्या': 'house_number',
  'मकान नंबर': 'house_number',
  'relation name': 'relation_name',
  'father or husband name': 'relation_name',
  "father's/husband's name": 'relation_name',
  'father/husband name': 'relation_name',
  'पिता/पति का नाम': 'relation_name',
  'relation type': 'relation_type',
  संबंध: 'relation_type',
  sex: 'gender',
  लिंग: 'gender',
  आयु: 'age',
  उम्र: 'age',
  'name (local)': 'name_local',
  'name local': 'name_local',
  'name (hindi)': 'name_local',
  'नाम (हिंदी)': 'name_local',
  'birth date': 'birth_date',
  'date of birth': 'birth_date',
  'support level': 'support_level',
  tags: 'tags',
  consent: 'consent',
  सहमति: 'consent',
};
for (const field of [...voterFields, ...recordFields]) headerAliases[headerName(field)] = field;

/**
 * Headings that fill a field only when no other column of the file does: `AC No` is the constituency when the
 * file has no `AC Name`; `PS No` (the polling station) the booth when it has no booth column.
 */
export const fallbackAliases: Record<string, ColumnField> = {
  'ac no': 'constituency',
  'ac number': 'constituency',
  'ps no': 'booth',
  'ps number': 'booth',
};

/** Every field a mapping may name (besides `field:<key>` and `ignore`), for the console and the 422s. */
export const mappableFields: readonly string[] = [...voterFields, ...recordFields, 'tags', 'consent'];

/**
 * The `mapping` part of an upload: JSON `{ "<heading>": "<field>" | "ignore" }`, checked against the workspace's
 * custom fields. Throws 422 on `mapping` that says what to fix.
 */
export function checkMapping(raw: string, defs: readonly VoterFieldDef[]): ImportMapping {
  const problem = (message: string) => validationError({ mapping: [message] });
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw problem('must be JSON: { "<heading of the file>": "<field>" | "ignore" }.');
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))
    throw problem('must be a JSON object: { "<heading of the file>": "<field>" | "ignore" }.');
  const entries = Object.entries(parsed as Record<string, unknown>);
  if (entries.length > 200) throw problem('must name at most 200 headings.');
  const keys = new Set(defs.map((d) => d.key));
  const mapping: Record<string, string> = {};
  for (const [heading, field] of entries) {
    if (heading.length > 200) throw problem('has a heading of over 200 characters.');
    if (typeof field !== 'string')
      throw problem(`maps "${heading.slice(0, 60)}" to something that is not a field name.`);
    const custom = /^field:([a-z][a-z0-9_]{0,39})$/.exec(field);
    if (field !== 'ignore' && !mappableFields.includes(field) && !(custom && keys.has(custom[1]!)))
      throw problem(
        `maps "${heading.slice(0, 60)}" to "${field.slice(0, 60)}", which is no field: use one of ${mappableFields.join(', ')}, field:<key> of a custom field, or ignore.`,
      );
    mapping[headerName(heading)] = field;
  }
  return mapping;
}

/**
 * The header row: which column holds which field (others are reported in `ignored`). The office's mapping
 * comes first, then the headings the import knows, then the fallbacks (`AC No` where no `AC Name`).
 */
export function headerColumns(
  header: string[],
  defs: readonly VoterFieldDef[],
  mapping: ImportMapping | undefined,
): FileColumns {
  const columns: FileColumns = {
    base: [],
    record: [],
    tags: undefined,
    consent: undefined,
    custom: [],
    ignored: [],
  };
  const seen = new Map<string, number[]>();
  const keys = new Set(defs.map((d) => d.key));
  const chosen = header.map((raw): ColumnField | `field:${string}` | undefined => {
    const name = headerName(raw);
    const mapped = mapping?.[name];
    if (mapped === 'ignore') return undefined;
    if (mapped) return mapped as ColumnField;
    const custom = /^field ?: ?(.+)$/.exec(name);
    if (custom) {
      const key = custom[1]!.replace(/ /g, '_');
      if (keys.has(key)) return `field:${key}`;
    }
    return headerAliases[name];
  });
  // A fallback heading fills its field only where no other column does.
  header.forEach((raw, index) => {
    const fallback = fallbackAliases[headerName(raw)];
    if (
      chosen[index] === undefined &&
      mapping?.[headerName(raw)] !== 'ignore' &&
      fallback &&
      !chosen.includes(fallback)
    )
      chosen[index] = fallback;
  });
  header.forEach((raw, index) => {
    const field = chosen[index];
    if (!field) {
      if (raw.trim() !== '' && columns.ignored.length < 100) columns.ignored.push(raw.trim());
      return;
    }
    seen.set(field, [...(seen.get(field) ?? []), index + 1]);
    if (field.startsWith('field:')) columns.custom.push([field.slice(6), index]);
    else if (field === 'tags') columns.tags = index;
    else if (field === 'consent') columns.consent = index;
    else if ((voterFields as readonly string[]).includes(field))
      columns.base.push([field as VoterField, index]);
    else columns.record.push([field as RecordField, index]);
  });
  for (const [field, at] of seen) {
    if (at.length > 1)
      throw fileError(
        `the header row (line 1) names the "${field}" column ${at.length} times (columns ${at.join(', ')}); keep one, or map the others to "ignore" (mapping).`,
      );
  }
  if (!seen.has('phone') && !seen.has('epic_number'))
    throw fileError(
      'the header row (line 1) has no column for the phone (such as "phone" or "Mobile No") nor for the EPIC number (such as "EPIC No"): the import knows a voter by one of them. Map the file\'s own heading with mapping: { "<heading>": "phone" }.',
    );
  if (!seen.has('name')) {
    throw fileError(
      `the header row (line 1) has no column for the voter's name (such as "name" or "Elector Name"); map the file's own heading to it with mapping: { "<heading>": "name" }. ` +
        `The import knows these fields: ${voterFields.join(', ')}, the voter record's (${recordFields.join(', ')}, tags) and field:<key> for custom fields, and the roll's own headings (docs/voter-imports.md).`,
    );
  }
  return columns;
}
