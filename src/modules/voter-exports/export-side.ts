import type SQLite from 'better-sqlite3';

// Loaded by the export's worker threads too: its imports stay light (types only).

/**
 * SQLite: where an export's tags and custom field values go in its rows. The export's statement leaves those
 * columns NULL and they are filled per batch, from one read of each side table, in place of a subquery per
 * voter: the tags' subquery (a sort per voter) took a third of the export's SQL at 200,000 voters, and the
 * threads' CPU for a tagged roll fell by about a sixth (docs/performance.md).
 */
export interface SideColumns {
  workspaceId: number;
  /** The column of the tags (`;` between them), or -1 when the export has none. */
  tags: number;
  /** Each custom field's key and its column. */
  fields: Array<[key: string, column: number]>;
}

type Row = Array<string | number | null>;

/**
 * A reader that fills the side columns of a batch of rows (id first, in id order) whose ids lie in
 * (after, upTo]. Its statements are prepared once, on `db` (the worker's connection, or the app's under its
 * lock). Each reads its table by voter id (`+workspace_id` keeps SQLite off the indexes that start with the
 * workspace, which would walk every row of it): over the batch's id range when its voters fill most of it (an
 * unfiltered export), by the batch's ids otherwise (a filtered one, whose range may hold thousands of other
 * voters for each of its own).
 */
export function sideReader(
  db: SQLite.Database,
  side: SideColumns,
): (rows: Row[], after: number, upTo: number) => void {
  const prepare = (select: string, table: 't' | 'f', order = '') => ({
    range: db
      .prepare(
        `${select} WHERE ${table}.voter_id > ? AND ${table}.voter_id <= ? AND +${table}.workspace_id = ? ${order}`,
      )
      .raw(true),
    ids: db
      .prepare(
        `${select} WHERE ${table}.voter_id IN (SELECT value FROM json_each(?)) AND +${table}.workspace_id = ? ${order}`,
      )
      .raw(true),
  });
  // The labels in the order a voter's read lists them: case-insensitive, then as written.
  const tags =
    side.tags >= 0
      ? prepare(
          `SELECT t.voter_id, n.label FROM voter_tags t
           JOIN voter_tag_names n ON n.workspace_id = t.workspace_id AND n.key = t.tag_key`,
          't',
          'ORDER BY t.voter_id, lower(n.label), n.label',
        )
      : undefined;
  const columnOf = new Map(side.fields);
  const fields =
    side.fields.length > 0
      ? prepare(
          `SELECT f.voter_id, f.field_key, coalesce(f.value_text, CASE WHEN f.value_number = CAST(f.value_number AS INTEGER)
             THEN CAST(f.value_number AS INTEGER) ELSE f.value_number END) FROM voter_field_values f`,
          'f',
        )
      : undefined;
  const read = (
    statements: { range: SQLite.Statement; ids: SQLite.Statement },
    rows: Row[],
    after: number,
    upTo: number,
  ) =>
    upTo - after <= 2 * rows.length
      ? statements.range.all(after, upTo, side.workspaceId)
      : statements.ids.all(JSON.stringify(rows.map((r) => r[0])), side.workspaceId);
  return (rows, after, upTo) => {
    if (rows.length === 0) return;
    const byId = new Map<number, Row>();
    for (const row of rows) byId.set(row[0] as number, row);
    if (tags) {
      // In voter id order: each voter's labels are one run.
      let row: Row | undefined;
      let id = -1;
      let labels: string[] = [];
      const done = () => {
        if (row && labels.length > 0) row[side.tags] = labels.join(';');
      };
      for (const [voter, label] of read(tags, rows, after, upTo) as Array<[number, string]>) {
        if (voter !== id) {
          done();
          id = voter;
          row = byId.get(voter);
          labels = [];
        }
        if (row) labels.push(label);
      }
      done();
    }
    if (fields)
      for (const [id, key, value] of read(fields, rows, after, upTo) as Array<
        [number, string, string | number | null]
      >) {
        const row = byId.get(id);
        const column = columnOf.get(key);
        if (row && column !== undefined) row[column] = value;
      }
  };
}
