import { Type } from 'typebox';
import { UnknownPlaces } from '../places/places.schemas.ts';
import { Ref } from '../../http/schemas.ts';
import { refPattern } from '../../refs.ts';

/** The voter import's request and answer shapes. */

const ImportErrors = Type.Array(
  Type.Object({
    row: Type.Integer({
      description: 'Line of the file where the row starts (the header is line 1).',
    }),
    field: Type.String(),
    message: Type.String(),
  }),
  { description: 'One entry per problem, the first IMPORT_MAX_ERRORS (default 1000) of them.' },
);

const ImportWarnings = Type.Array(
  Type.Object({
    line: Type.Integer({ description: 'Line of the file where the row starts (the header is line 1).' }),
    field: Type.String(),
    value: Type.String({ description: 'The cell as the file had it (at most 100 characters).' }),
    reason: Type.String(),
  }),
  {
    description:
      'Cells left out of rows that were kept (a bad phone, EPIC number, email, age, gender, part or serial number, tag or custom field: the voter is imported without it), the first IMPORT_MAX_ERRORS of them.',
  },
);

export const ImportColumns = Type.Object(
  {
    fields: Type.Array(Type.String(), { description: 'What a mapping may name, besides `ignore`.' }),
    headings: Type.Record(Type.String(), Type.String(), {
      description: 'Headings the import knows (as compared: lower case, single spaces, no dots) -> field.',
    }),
    fallbacks: Type.Record(Type.String(), Type.String(), {
      description:
        'Headings that fill their field only where no other column of the file does (AC No, PS No).',
    }),
    last_mapping: Type.Union([Type.Record(Type.String(), Type.String()), Type.Null()], {
      description: "The workspace's last mapping (headings as compared), or null.",
    }),
  },
  { title: 'VoterImportColumns' },
);

export const ImportResultSchema = Type.Object(
  {
    imported: Type.Integer({ description: 'Voters this import created (new name + phone identities).' }),
    updated: Type.Integer({
      description:
        'The other valid rows: each matched a voter that already existed (same name, case-insensitive and spaces collapsed, and same phone) and updated its fields, or repeated an identity seen on an earlier line of the file (applied in line order). A matched voter changes only in the fields the row gives: a missing column or an empty cell keeps the field. imported + updated + failed = the data rows of the file (blank rows aside).',
    }),
    failed: Type.Integer({
      description:
        "Rows refused (no name; a repeat of another row's EPIC number, or of its part and serial number); nothing of them was written.",
    }),
    dry_run: Type.Boolean({ description: 'true when nothing was written (`?dry_run=true`).' }),
    errors: ImportErrors,
    warnings: ImportWarnings,
    unknown_places: UnknownPlaces,
    ignored_columns: Type.Array(Type.String(), {
      description:
        "The header's columns no field took, as the file names them (an export's id, created_at and updated_at are among them; at most 100).",
    }),
  },
  { title: 'VoterImportResult' },
);

const NullableTimestamp = Type.Union([Type.String({ format: 'date-time' }), Type.Null()]);

export const ImportJob = Type.Object(
  {
    id: Ref('imp'),
    status: Type.Union(
      [Type.Literal('queued'), Type.Literal('running'), Type.Literal('completed'), Type.Literal('failed')],
      {
        description:
          '`queued -> running -> completed | failed`. `failed`: the file as a whole could not be imported (`message` says why) and nothing of it was applied.',
      },
    ),
    file_name: Type.String(),
    bytes: Type.Integer({ description: 'Size of the stored upload.' }),
    progress: Type.Object({ bytes_read: Type.Integer(), rows_read: Type.Integer() }),
    imported: Type.Integer(),
    updated: Type.Integer(),
    failed: Type.Integer(),
    errors: ImportErrors,
    warnings: ImportWarnings,
    unknown_places: UnknownPlaces,
    ignored_columns: Type.Array(Type.String(), {
      description:
        "The header's columns no field took, as the file names them (an export's id, created_at and updated_at are among them; at most 100).",
    }),
    message: Type.Union([Type.String(), Type.Null()], { description: 'Why a failed job failed.' }),
    created_at: Type.String({ format: 'date-time' }),
    started_at: NullableTimestamp,
    finished_at: NullableTimestamp,
  },
  { title: 'VoterImportJob' },
);

export const JobParams = Type.Object({
  // Only `imp_<n>` (the contract's form of a job id), never a bare number.
  import_id: Type.String({
    maxLength: 40,
    pattern: refPattern('imp'),
    'x-id': 'imp',
    description: 'The job id, `imp_<n>`.',
  }),
});

export const ImportQuery = Type.Object({
  dry_run: Type.Boolean({
    default: false,
    description:
      '`true`: every check runs and the answer has the same counts and errors (with `dry_run: true`), but nothing is written.',
  }),
});

export const importDescription = `Multipart form data: an optional field \`mapping\`, then the part \`file\`, a CSV file,
UTF-8 with or without a BOM, up to IMPORT_MAX_BYTES (default 100 MiB; larger is 413 and nothing is written). Only
the first file part is read, and it must be named \`file\`; the fields before it are read with it.

The header row names the columns in any order; names are matched case-insensitively, with spaces and
underscores alike (and dots dropped: \`Sl. No.\`). The voter's fields: \`name, phone, email, constituency, booth,
ward, address\`; the voter record's: \`epic_number, part_number, serial_number, page_number, house_number,
relation_name, relation_type, gender, name_local, language, birth_date, age, support_level, tags\` (\`;\` between
tags; a row's tags replace the voter's); \`field:<key>\` for a custom field. The headings of Indian roll exports are
read too, in English and Hindi (\`Elector Name\`, \`Mobile No\`, \`EPIC No\`, \`AC Name\`, \`Part No\`, \`Sl No\`,
\`निर्वाचक का नाम\`, \`मोबाइल\`, ...: \`GET /api/voters/import/columns\` lists them). \`mapping\` (JSON \`{ "<heading>":
"<field>" | "ignore" }\`) maps the office's own headings first; it is remembered as the workspace's last. Other
columns are ignored and listed in \`ignored_columns\`. A name column is required, and a phone or EPIC column; no
field may be filled by two columns (422 otherwise).

A bad optional cell (phone, EPIC number, email, age, gender, part or serial number, a custom field...) is left out of
its row and the row is kept, with a warning in \`warnings\`; a row is refused (\`failed\`, \`errors\`) only without a
name, or as a repeat. EPIC numbers take the current form (ABC1234567) and the older ones (letters, digits, / and -,
6 to 20 characters: UP/74/381/354053). A row with an EPIC number and no phone is kept with \`phone: null\`; a leading
\`'\` that an export put before a formula-like value is removed. Fields may be quoted; lines end in LF, CRLF or CR
alone; blank rows are skipped.

A row whose EPIC number a voter of the workspace holds updates that voter (all but its name and phone). A row whose
part_number and serial_number another voter holds (or a later row of the file) is refused and reported. A row with the same name (case-insensitive, spaces collapsed) and phone as a voter of the workspace updates that
voter instead of adding another; within one file the later row wins. The file is read to its end before
anything is written, and then applied as a whole: a file refused part-way (too large, not UTF-8, an unclosed
quote, a line of over a million characters) leaves the voters unchanged.

A row that matches a voter changes only what the file says: a column the file lacks leaves that field as it is,
and so does an empty cell (clear a field with \`PUT /api/voters/{id}\`). \`?dry_run=true\` runs every check and
answers the same counts, errors and warnings with \`dry_run: true\`, writing nothing. docs/voter-imports.md has the
whole table of headings.`;
