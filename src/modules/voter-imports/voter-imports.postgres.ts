import { once } from 'node:events';
import type { Kysely } from 'kysely';
import { type CopyStreamQuery, from as copyFrom } from 'pg-copy-streams';
import type { BulkConnections } from '../../db/connect.ts';
import type { Database } from '../../db/schema.ts';
import { type AuditEntry, auditInsert } from '../audit/audit.repository.ts';

import {
  type VoterImport,
  type ImportProblem,
  type StagedVoter,
  stagedColumns,
  voterColumns,
  stagingColumnsSql,
  mergedColumns,
  upsertSet,
  changedCondition,
  epicHeld,
  rollUpdate,
  repeatsSql,
  settleRollNumbers,
  sideWrites,
  StagedKinds,
  ANALYZE_AFTER_ROWS,
  newIdentities,
} from './voter-imports.sql.ts';

/** An import on PostgreSQL: COPY into a temporary table, applied in one transaction on a bulk connection. */

/**
 * VACUUM of the voters, their search table, tags and custom field values after a large PostgreSQL import, in
 * the background (see apply): the visibility map, and the trigram indexes' pending entries merged. Without it
 * a count over an index read every matching row of the table besides its index entry (an index-only scan
 * with 250,000 heap fetches: 50 ms, against 30 ms after it).
 */
function vacuumLater(connectFor: BulkConnections, workspaceId: number): void {
  void (async () => {
    const client = await connectFor(workspaceId);
    try {
      await client.query('VACUUM voters, voter_search, voter_tags, voter_field_values');
      client.release();
    } catch (error) {
      client.release(error as Error);
    }
  })().catch(() => {
    // A pool closed at shutdown, or no connection free: autovacuum gets there later.
  });
}

const COPY_SPECIAL = /[\\\t\n\r]/;
const COPY_SPECIAL_G = /[\\\t\n\r]/g;
const copyEscapes: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

/** A value in COPY's text format. */
function copyValue(value: string | number | null): string {
  if (value === null) return '\\N';
  if (typeof value === 'number') return String(value);
  return COPY_SPECIAL.test(value) ? value.replace(COPY_SPECIAL_G, (c) => copyEscapes[c]!) : value;
}

/**
 * PostgreSQL: one transaction on one pooled connection for the whole import. Rows stream into a temporary
 * table through COPY; `apply` is one set-based upsert (per identity: the last line's name and, per field, the last value
 * given, as SQLite's upsert in line order gives)
 * and COMMIT; `abort` rolls everything back.
 */
export async function startPostgresImport(
  kysely: Kysely<Database>,
  connectFor: BulkConnections,
  workspaceId: number,
): Promise<VoterImport> {
  const client = await connectFor(workspaceId);
  let copy: CopyStreamQuery;
  try {
    await client.query('BEGIN');
    // No JIT: the import's statements cross jit_above_cost at a hundred thousand rows, and compiling them took
    // about a second of a million-row import that their plans (scans, hash joins, inserts) do not win back.
    await client.query(`SELECT set_config('jit', 'off', true)`);
    await client.query(`CREATE TEMP TABLE voters_import (${stagingColumnsSql}) ON COMMIT DROP`);
    copy = client.query(copyFrom(`COPY voters_import (${stagedColumns.join(', ')}) FROM STDIN`));
  } catch (error) {
    client.release(error as Error);
    throw error;
  }
  return new PostgresImport(kysely, connectFor, workspaceId, client, copy);
}

type BulkClient = Awaited<ReturnType<BulkConnections>>;

class PostgresImport implements VoterImport {
  private done = false;
  private failure: Error | undefined;
  private staged = 0;
  private readonly seen = new StagedKinds();
  private readonly ws: string;
  private problems: ImportProblem[] = [];
  /** The end of the COPY: observed at once so it is never unhandled; awaited (and thrown) where the copy ends. */
  private readonly finished: Promise<void>;

  constructor(
    private readonly kysely: Kysely<Database>,
    private readonly connectFor: BulkConnections,
    private readonly workspaceId: number,
    private readonly client: BulkClient,
    private readonly stream: CopyStreamQuery,
  ) {
    this.ws = String(Math.trunc(workspaceId));
    stream.on('error', (error: Error) => {
      this.failure ??= error;
    });
    this.finished = new Promise<void>((resolve, reject) => {
      stream.on('finish', resolve);
      stream.on('error', reject);
    });
    this.finished.catch(() => {});
  }

  skipped(): ImportProblem[] {
    return this.problems;
  }

  async stage(rows: readonly StagedVoter[]): Promise<void> {
    if (this.failure) throw this.failure;
    this.seen.add(rows);
    let text = '';
    for (const r of rows) {
      for (let i = 0; i < stagedColumns.length; i++)
        text += (i === 0 ? '' : '\t') + copyValue(r[stagedColumns[i]!]);
      text += '\n';
    }
    this.staged += rows.length;
    if (!this.stream.write(text)) await once(this.stream, 'drain');
  }

  async apply(now: string, audit?: (imported: number) => AuditEntry): Promise<{ imported: number }> {
    const { client } = this;
    try {
      await this.settle();
      if (this.seen.roll)
        await client.query(rollUpdate('voters_import', this.ws, '$1::timestamptz', ''), [now]);
      const imported = await this.upsert(now);
      if (this.seen.side) await this.writeSides();
      // Statistics in the import's own transaction (ANALYZE counts the rows it inserted), so they commit with
      // the rows: no read after a large import meets the tables without them (the background VACUUM
      // (ANALYZE) brought them seconds to a minute later).
      if (this.staged >= ANALYZE_AFTER_ROWS)
        await client.query('ANALYZE voters, voter_search, voter_tags, voter_field_values');
      if (audit) {
        const entry = auditInsert(this.kysely, audit(imported)).compile();
        await client.query(entry.sql, entry.parameters as unknown[]);
      }
      await client.query('COMMIT');
      this.release();
      // Without fresh statistics after a bulk load the planner guesses a handful of rows per workspace
      // and picks plans (bitmap scan + sort) that make the export's keyset pages quadratic: a large import
      // analyzes before it commits (above). VACUUM sets the visibility map, so counting a filtered list is
      // an index-only scan instead of a visit to every matching row. It runs after the answer, on a
      // connection of its own: the import's client is not kept waiting for it (nor is a shutdown that would
      // cut it short with the rows committed).
      if (this.staged >= ANALYZE_AFTER_ROWS) vacuumLater(this.connectFor, this.workspaceId);
      return { imported };
    } catch (error) {
      await this.rollBack(error as Error);
      throw error;
    }
  }

  async preview(): Promise<{ imported: number }> {
    try {
      await this.settle();
      const result = await this.client.query<{ imported: string }>(newIdentities('voters_import', this.ws));
      await this.client.query('ROLLBACK');
      this.release();
      return { imported: Number(result.rows[0]?.imported ?? 0) };
    } catch (error) {
      await this.rollBack(error as Error);
      throw error;
    }
  }

  async abort(): Promise<void> {
    if (this.done) return;
    try {
      if (!this.stream.writableEnded) {
        this.stream.end();
        await this.finished.catch(() => {}); // aborting: the copy's own error no longer matters
      }
      await this.client.query('ROLLBACK');
      this.release();
    } catch (error) {
      // A connection in an unknown state is closed rather than returned to the pool.
      this.release(error as Error);
    }
  }

  /** After the copy: the roll numbers settled (see settleRollNumbers) before anything is applied. */
  private async settle(): Promise<void> {
    this.stream.end();
    await this.finished;
    if (this.seen.roll) {
      await this.client.query('CREATE INDEX ON voters_import (epic_number)');
      await this.client.query('CREATE INDEX ON voters_import (part_number, serial_number)');
    }
    // The file's size for the planner: the roll's, the tags' and the values' statements join the whole file (hash
    // joins; an index on (phone, name_key, line) for the tags' "last row" test went unused, and cost a second at
    // a million rows).
    if (this.seen.roll || this.seen.side) await this.client.query('ANALYZE voters_import');
    if (this.seen.roll)
      this.problems = await settleRollNumbers(
        async (text, values) =>
          (await this.client.query(text, values)).rows as Array<Record<string, unknown>>,
        'voters_import',
        this.ws,
        [],
      );
  }

  /** The staged rows into the voters, in one statement; the number of voters it created. */
  private async upsert(now: string): Promise<number> {
    // A row from the roll without a phone is a voter of its own (its EPIC number is its identity); a row with
    // neither (its phone was left out as bad) is one of its own too, never merged with a namesake.
    const identity =
      'phone, name_key, CASE WHEN phone IS NULL THEN coalesce(epic_number, CAST(line AS TEXT)) END';
    const unheld = this.seen.roll ? ` WHERE NOT ${epicHeld('s', this.ws)}` : '';
    // Rows of one identity are merged (the last line's name, each field's last value given). A file with
    // no such repeats (a roll: one line per voter) skips the merge: its fifteen sorted aggregates over a
    // million rows were 17 of the upsert's 43 s. Each row is then its own merge, so the result is the same.
    const repeats = await this.client.query(repeatsSql('voters_import', identity));
    // New voters' ids follow the file's lines. Without repeats the staging table is read as COPY wrote it (a
    // temporary table is never scanned in parallel nor from the middle, as a large table's synchronized scans
    // are), so no sort is asked for: sorting a million wide rows by line took a second and spilled to disk.
    const merge = repeats.rowCount !== 0;
    const src = !merge
      ? `SELECT line, phone, name_key, name, ${mergedColumns.join(', ')} FROM voters_import s${unheld}`
      : `SELECT max(line) AS line, phone, name_key, (array_agg(name ORDER BY line DESC))[1] AS name,
           ${mergedColumns.map((c) => `(array_agg(${c} ORDER BY line DESC) FILTER (WHERE ${c} IS NOT NULL))[1] AS ${c}`).join(',\n               ')}
         FROM voters_import s${unheld}
         GROUP BY ${identity}`;
    const result = await this.client.query<{ imported: number }>(
      `WITH src AS (${src}), up AS (
         INSERT INTO voters (workspace_id, ${voterColumns.join(', ')}, created_at, updated_at)
         SELECT $1, ${voterColumns.join(', ')}, $2, $2 FROM src${merge ? ' ORDER BY line' : ''}
         ON CONFLICT (workspace_id, phone, name_key) DO UPDATE SET ${upsertSet}
         WHERE ${changedCondition('IS DISTINCT FROM')}
         RETURNING (xmax = 0) AS inserted
       )
       SELECT count(*) FILTER (WHERE inserted) AS imported FROM up`,
      [this.workspaceId, now],
    );
    return Number(result.rows[0]?.imported ?? 0);
  }

  /** The tags and custom field values of the staged rows, onto their voters. */
  private async writeSides(): Promise<void> {
    // Each row's voter, found once for the tags and the custom field values (by EPIC number, then by name
    // and phone, as sideWrites' SQLite seeks do), in two hash joins over the file, into a narrow table of
    // its own. At a million rows, index seeks for each of three statements took 17 s, and an UPDATE of the
    // wide staging rows (a new version of each, and of its three index entries) 9.4 s.
    await this.client.query(
      `CREATE TEMP TABLE voters_import_ids ON COMMIT DROP AS
       SELECT s.line, coalesce(e.id, p.id) AS voter_id FROM voters_import s
       LEFT JOIN voters e ON e.workspace_id = ${this.ws} AND e.epic_number = s.epic_number
       LEFT JOIN voters p ON e.id IS NULL AND p.workspace_id = ${this.ws} AND p.phone = s.phone
         AND p.name_key = s.name_key`,
    );
    await this.client.query('ANALYZE voters_import_ids');
    const shared = await this.client.query(
      repeatsSql('voters_import_ids', 'voter_id', 'voter_id IS NOT NULL'),
    );
    for (const text of sideWrites('voters_import', this.ws, '', true, shared.rowCount === 0))
      await this.client.query(text);
  }

  /** Cleanup after a failure (the connection may be gone): the error thrown is the first one. */
  private async rollBack(error: Error): Promise<void> {
    await this.client.query('ROLLBACK').catch(() => {});
    this.release(error);
  }

  private release(error?: Error): void {
    if (this.done) return;
    this.done = true;
    this.client.release(error);
  }
}
