import { Type } from 'typebox';

/** The voter export's query and its documentation. */

export const ExportQuery = Type.Object({
  format: Type.Union([Type.Literal('csv'), Type.Literal('excel')], {
    default: 'csv',
    description:
      '`csv` (default) or `excel` (.xlsx; past 1,048,575 voters the rows go on in sheets "Voters 2", "Voters 3", ..., each with the header).',
  }),
  filters: Type.Optional(
    Type.String({
      description:
        'A JSON object of the list\'s filters (constituency, booth, ward, search, the voter record\'s and `fields.<key>`), e.g. `{"constituency":"Varanasi","part_number":12,"tags":["youth"]}`. Anything else is 422.',
    }),
  ),
  include_sensitive: Type.Boolean({
    default: false,
    description:
      '`true` (politicians only; 403 otherwise) adds support_level and the sensitive custom fields; audited as `voters.exported_sensitive`.',
  }),
});

export const exportDescription = `A file download (\`Content-Disposition: attachment; filename="voters-<YYYY-MM-DD>.csv|xlsx"\`),
streamed in id order. Columns: id, name, phone, email, constituency, booth, ward, address, created_at,
updated_at, then the voter record's: epic_number, part_number, serial_number, page_number, house_number,
relation_name, relation_type, gender, name_local, language, birth_date (when known), age (today), support_level
(only with \`include_sensitive=true\`), tags (\`;\` between them), and each custom field as \`field:<key>\` (sensitive
ones only with \`include_sensitive=true\`), after a header row. CSV: UTF-8 without a BOM, lines ending in LF, a field quoted ("..." with "" for a
quote) when it holds a comma, quote or line break, an empty field for a missing value. A value a spreadsheet would run as a formula (starting with =, +, -, @, tab or
CR and not a plain number such as +919812345678) is written with a leading \`'\`. An exported CSV imports back
unchanged.

A workspace runs at most EXPORT_MAX_CONCURRENT (default 2) exports at once: one more is 429
\`rate_limit_exceeded\` with \`Retry-After\`. A download that makes no progress for EXPORT_IDLE_TIMEOUT_MS (default
30 s) is ended: the connection is closed before the end of the file.`;
