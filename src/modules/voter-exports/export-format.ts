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
  // id is a number and the timestamps ISO 8601 strings: neither needs quoting nor the formula guard.
  for (const r of rows) {
    text += `${r[0]},${csvField(r[1])},${csvField(r[2])},${csvField(r[3])},${csvField(r[4])},${csvField(r[5])},${csvField(r[6])},${csvField(r[7])},${r[8]},${r[9]}\n`;
  }
  return text;
}

/** The file text of a batch of export rows: CSV lines, or the sheet's `<row>` elements for Excel. */
export function exportText(format: ExportFormat, rows: readonly ExportRow[]): string {
  return format === 'csv' ? csvLines(rows) : xlsxRows(rows);
}
