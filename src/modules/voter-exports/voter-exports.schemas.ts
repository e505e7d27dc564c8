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
        'A JSON object with any of `constituency`, `booth`, `ward`, `search` (as the list filters), e.g. `{"constituency":"Varanasi","ward":"7"}`. Anything else is 422.',
    }),
  ),
});

export const exportDescription = `A file download (\`Content-Disposition: attachment; filename="voters-<YYYY-MM-DD>.csv|xlsx"\`),
streamed in id order. Columns: id, name, phone, email, constituency, booth, ward, address, created_at,
updated_at, after a header row. CSV: UTF-8 without a BOM, lines ending in LF, a field quoted ("..." with "" for a
quote) when it holds a comma, quote or line break, an empty field for a missing value. A value a spreadsheet would run as a formula (starting with =, +, -, @, tab or
CR and not a plain number such as +919812345678) is written with a leading \`'\`. An exported CSV imports back
unchanged.

A workspace runs at most EXPORT_MAX_CONCURRENT (default 2) exports at once: one more is 429
\`rate_limit_exceeded\` with \`Retry-After\`. A download that makes no progress for EXPORT_IDLE_TIMEOUT_MS (default
30 s) is ended: the connection is closed before the end of the file.`;
