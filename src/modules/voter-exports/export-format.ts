import { csvField } from '../../lib/csv.ts';
import { xlsxRows } from '../../lib/xlsx.ts';
import type { ExportRow } from './voter-exports.repository.ts';

// Loaded by the export's worker threads too: its imports stay light (types only from the database layer).

export const exportFormats = {
  csv: { contentType: 'text/csv; charset=utf-8', extension: 'csv' },
  excel: {
    contentType: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
    extension: 'xlsx',
  },
} as const;
export type ExportFormat = keyof typeof exportFormats;

/** CSV lines (each ending in LF) of a batch of export rows. */
export function csvLines(rows: readonly ExportRow[]): string {
  let text = '';
  for (const r of rows) {
    // id is a number: it needs neither quoting nor the formula guard.
    let line = String(r[0]);
    for (let i = 1; i < r.length; i++) line += `,${csvField(r[i])}`;
    text += `${line}\n`;
  }
  return text;
}

/** The file text of a batch of export rows: CSV lines, or the sheet's `<row>` elements for Excel. */
export function exportText(format: ExportFormat, rows: readonly ExportRow[]): string {
  return format === 'csv' ? csvLines(rows) : xlsxRows(rows);
}
