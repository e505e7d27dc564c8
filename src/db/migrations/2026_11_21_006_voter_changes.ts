import { type Kysely, sql } from 'kysely';
import { bigintType, isPostgres } from './helpers.ts';

/**
 * `voter_changes`: what each small change did to the columns that lists filter and search on, keyed by the
 * `voter_counts.version` it produced. A list that remembered an exact total and page starts for an older
 * version brings them forward from these rows instead of counting again (see the README, "Voters").
 *
 * - One row per changed voter: `op` (create, update, delete), the values before (`old_*`) and after
 *   (`new_*`). A delete keeps only the voter's constituency, booth and ward, and removes the voter's earlier
 *   rows: a deleted voter's name, email and phone are not kept here.
 * - A version with no rows (a bulk change, a voter moved between workspaces, rows pruned) means "count
 *   again"; so does any gap.
 * - Bulk changes log nothing: on PostgreSQL a statement of more than 100 rows (the triggers are
 *   statement-level); on SQLite while `voter_counts.bulk` is set, which an import does for each of its
 *   transactions.
 * - Rows are kept for the last 256 versions of the workspace and at most 10 minutes (`at`, Unix seconds):
 *   pruned by these triggers and by the delivery worker's sweep (voters.repository pruneVoterChanges).
 */
const KEEP_VERSIONS = 256;
const KEEP_SECONDS = 600;
const LOG_AT_MOST = 100;
const fields = ['name', 'email', 'phone', 'constituency_key', 'booth', 'ward'] as const;
const placeFields = ['constituency_key', 'booth', 'ward'] as const;
const cols = (prefix: string, list: readonly string[] = fields) =>
  list.map((f) => `${prefix}${f}`).join(', ');
const values = (row: string, list: readonly string[] = fields) => list.map((f) => `${row}.${f}`).join(', ');

export async function up(db: Kysely<unknown>): Promise<void> {
  let table = db.schema
    .createTable('voter_changes')
    .addColumn('workspace_id', bigintType(db), (c) => c.notNull())
    .addColumn('version', bigintType(db), (c) => c.notNull())
    .addColumn('voter_id', bigintType(db), (c) => c.notNull())
    .addColumn('op', 'text', (c) => c.notNull())
    .addColumn('at', bigintType(db), (c) => c.notNull());
  for (const prefix of ['old_', 'new_'])
    for (const f of fields) table = table.addColumn(`${prefix}${f}`, 'text');
  table = table.addPrimaryKeyConstraint('voter_changes_pkey', ['workspace_id', 'version', 'voter_id']);
  if (!isPostgres(db)) table = table.modifyEnd(sql`WITHOUT ROWID`);
  await table.execute();
  // A delete removes the voter's earlier rows: one seek per deleted voter, however many are deleted.
  await db.schema
    .createIndex('voter_changes_voter')
    .on('voter_changes')
    .columns(['workspace_id', 'voter_id'])
    .execute();

  if (isPostgres(db)) {
    await postgresInsertAndDeleteLogs(db);
    await postgresUpdateLog(db);
    return;
  }
  await sqliteTriggers(db);
}

// PostgreSQL: statement-level triggers' functions (migration 005 made the triggers).
const pgNow = 'CAST(extract(epoch FROM now()) AS bigint)';
const pgStale = `v.workspace_id = c.workspace_id
    AND (v.version <= c.version - ${KEEP_VERSIONS} OR v.at < ${pgNow} - ${KEEP_SECONDS})`;
const pgSmall = (rows: string) =>
  `(SELECT count(*) FROM (SELECT 1 FROM ${rows} LIMIT ${LOG_AT_MOST + 1}) s) <= ${LOG_AT_MOST}`;
const pgCounted = (rows: string, sign: '+' | '-') =>
  `UPDATE voter_counts c SET total = c.total ${sign} n.changed, version = c.version + 1
      FROM (SELECT workspace_id, count(*) AS changed FROM ${rows} GROUP BY workspace_id) n
      WHERE c.workspace_id = n.workspace_id`;

/** The insert and delete triggers' functions: counted, and logged when the statement is small. */
async function postgresInsertAndDeleteLogs(db: Kysely<unknown>): Promise<void> {
  await sql
    .raw(
      `CREATE OR REPLACE FUNCTION voter_counts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF ${pgSmall('new_rows')} THEN
        WITH c AS (${pgCounted('new_rows', '+')} RETURNING c.workspace_id, c.version),
        logged AS (
          INSERT INTO voter_changes (workspace_id, version, voter_id, op, at, ${cols('new_')})
            SELECT c.workspace_id, c.version, r.id, 'create', ${pgNow}, ${values('r')}
            FROM c JOIN new_rows r ON r.workspace_id = c.workspace_id)
        DELETE FROM voter_changes v USING c WHERE ${pgStale};
      ELSE
        ${pgCounted('new_rows', '+')};
      END IF;
      RETURN NULL;
    END $$`,
    )
    .execute(db);
  // A delete removes the deleted voters' earlier rows, and logs only where they were (not who).
  await sql
    .raw(
      `CREATE OR REPLACE FUNCTION voter_counts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF ${pgSmall('old_rows')} THEN
        WITH c AS (${pgCounted('old_rows', '-')} RETURNING c.workspace_id, c.version),
        pruned AS (
          DELETE FROM voter_changes v USING c
            WHERE ${pgStale} OR (v.workspace_id = c.workspace_id AND v.voter_id IN (SELECT id FROM old_rows)))
        INSERT INTO voter_changes (workspace_id, version, voter_id, op, at, ${cols('old_', placeFields)})
          SELECT c.workspace_id, c.version, r.id, 'delete', ${pgNow}, ${values('r', placeFields)}
          FROM c JOIN old_rows r ON r.workspace_id = c.workspace_id;
      ELSE
        ${pgCounted('old_rows', '-')};
        DELETE FROM voter_changes v USING old_rows r WHERE v.workspace_id = r.workspace_id AND v.voter_id = r.id;
      END IF;
      RETURN NULL;
    END $$`,
    )
    .execute(db);
}

/** The update trigger's function: a new version, logged when the statement is small. */
async function postgresUpdateLog(db: Kysely<unknown>): Promise<void> {
  const changed = `(n.workspace_id, ${values('n')}) IS DISTINCT FROM (o.workspace_id, ${values('o')})`;
  await sql
    .raw(
      `CREATE OR REPLACE FUNCTION voter_counts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF ${pgSmall('new_rows')} THEN
        -- A voter moved to another workspace leaves both workspaces without a log for this version.
        WITH d AS (
          SELECT n.id, n.workspace_id, o.workspace_id AS old_workspace_id,
                 ${fields.map((f) => `o.${f} AS old_${f}`).join(', ')},
                 ${fields.map((f) => `n.${f} AS new_${f}`).join(', ')}
          FROM new_rows n JOIN old_rows o ON o.id = n.id
          WHERE ${changed}),
        c AS (
          UPDATE voter_counts c SET version = c.version + 1
            FROM (SELECT workspace_id FROM d UNION SELECT old_workspace_id FROM d) w
            WHERE c.workspace_id = w.workspace_id
            RETURNING c.workspace_id, c.version),
        logged AS (
          INSERT INTO voter_changes (workspace_id, version, voter_id, op, at, ${cols('old_')}, ${cols('new_')})
            SELECT c.workspace_id, c.version, d.id, 'update', ${pgNow}, ${cols('d.old_')}, ${cols('d.new_')}
            FROM c JOIN d ON d.workspace_id = c.workspace_id
            WHERE NOT EXISTS (SELECT 1 FROM d m WHERE m.workspace_id <> m.old_workspace_id
                                AND c.workspace_id IN (m.workspace_id, m.old_workspace_id)))
        DELETE FROM voter_changes v USING c WHERE ${pgStale};
      ELSE
        UPDATE voter_counts c SET version = c.version + 1
          FROM (SELECT DISTINCT unnest(ARRAY[n.workspace_id, o.workspace_id]) AS workspace_id
                FROM new_rows n JOIN old_rows o ON o.id = n.id
                WHERE ${changed}) n
          WHERE c.workspace_id = n.workspace_id;
      END IF;
      RETURN NULL;
    END $$`,
    )
    .execute(db);
}

/** SQLite: row triggers that count, bump the version and log unless `bulk` is set. */
async function sqliteTriggers(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('voter_counts')
    .addColumn('bulk', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  // Pruned here by version (a range of the primary key, empty while `bulk` is set); by age in the sweep.
  const now = `CAST(strftime('%s', 'now') AS INTEGER)`;
  const log = (workspace: string, voter: string, op: string, columns: string, row: string, when = '') =>
    `INSERT INTO voter_changes (workspace_id, version, voter_id, op, at, ${columns})
       SELECT workspace_id, version, ${voter}, '${op}', ${now}, ${row} FROM voter_counts
       WHERE workspace_id = ${workspace} AND bulk = 0${when};
     DELETE FROM voter_changes WHERE workspace_id = ${workspace}
       AND version <= (SELECT version FROM voter_counts WHERE workspace_id = ${workspace} AND bulk = 0) - ${KEEP_VERSIONS};`;
  await sql`DROP TRIGGER voters_count_insert`.execute(db);
  await sql`DROP TRIGGER voters_count_delete`.execute(db);
  await sql`DROP TRIGGER voters_count_update`.execute(db);
  await sql
    .raw(
      `CREATE TRIGGER voters_count_insert AFTER INSERT ON voters BEGIN
      UPDATE voter_counts SET total = total + 1, version = version + 1 WHERE workspace_id = new.workspace_id;
      ${log('new.workspace_id', 'new.id', 'create', cols('new_'), values('new'))}
    END`,
    )
    .execute(db);
  await sql
    .raw(
      `CREATE TRIGGER voters_count_delete AFTER DELETE ON voters BEGIN
      UPDATE voter_counts SET total = total - 1, version = version + 1 WHERE workspace_id = old.workspace_id;
      DELETE FROM voter_changes WHERE workspace_id = old.workspace_id AND voter_id = old.id;
      ${log('old.workspace_id', 'old.id', 'delete', cols('old_', placeFields), values('old', placeFields))}
    END`,
    )
    .execute(db);
  await sql
    .raw(
      `CREATE TRIGGER voters_count_update
      AFTER UPDATE OF workspace_id, ${fields.join(', ')} ON voters
      WHEN ${['workspace_id', ...fields].map((f) => `old.${f} IS NOT new.${f}`).join(' OR ')}
      BEGIN
        UPDATE voter_counts SET version = version + 1 WHERE workspace_id IN (old.workspace_id, new.workspace_id);
        ${log('new.workspace_id', 'new.id', 'update', `${cols('old_')}, ${cols('new_')}`, `${values('old')}, ${values('new')}`, ' AND old.workspace_id = new.workspace_id')}
      END`,
    )
    .execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  // Back to migration 005's triggers: they bump the version and log nothing.
  if (isPostgres(db)) {
    await sql`CREATE OR REPLACE FUNCTION voter_counts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE voter_counts c SET total = c.total + n.added, version = c.version + 1
          FROM (SELECT workspace_id, count(*) AS added FROM new_rows GROUP BY workspace_id) n
          WHERE c.workspace_id = n.workspace_id;
        RETURN NULL;
      END $$`.execute(db);
    await sql`CREATE OR REPLACE FUNCTION voter_counts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE voter_counts c SET total = c.total - o.removed, version = c.version + 1
          FROM (SELECT workspace_id, count(*) AS removed FROM old_rows GROUP BY workspace_id) o
          WHERE c.workspace_id = o.workspace_id;
        RETURN NULL;
      END $$`.execute(db);
    await sql`CREATE OR REPLACE FUNCTION voter_counts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE voter_counts c SET version = c.version + 1
          FROM (SELECT DISTINCT unnest(ARRAY[n.workspace_id, o.workspace_id]) AS workspace_id
                FROM new_rows n JOIN old_rows o ON o.id = n.id
                WHERE (n.workspace_id, n.name, n.email, n.phone, n.constituency_key, n.booth, n.ward)
                  IS DISTINCT FROM (o.workspace_id, o.name, o.email, o.phone, o.constituency_key, o.booth, o.ward)) n
          WHERE c.workspace_id = n.workspace_id;
        RETURN NULL;
      END $$`.execute(db);
  } else {
    await sql`DROP TRIGGER voters_count_insert`.execute(db);
    await sql`DROP TRIGGER voters_count_delete`.execute(db);
    await sql`DROP TRIGGER voters_count_update`.execute(db);
    await sql`CREATE TRIGGER voters_count_insert AFTER INSERT ON voters BEGIN
      UPDATE voter_counts SET total = total + 1, version = version + 1 WHERE workspace_id = new.workspace_id;
    END`.execute(db);
    await sql`CREATE TRIGGER voters_count_delete AFTER DELETE ON voters BEGIN
      UPDATE voter_counts SET total = total - 1, version = version + 1 WHERE workspace_id = old.workspace_id;
    END`.execute(db);
    await sql`CREATE TRIGGER voters_count_update
      AFTER UPDATE OF workspace_id, name, email, phone, constituency_key, booth, ward ON voters
      WHEN old.workspace_id IS NOT new.workspace_id OR old.name IS NOT new.name OR old.email IS NOT new.email
        OR old.phone IS NOT new.phone OR old.constituency_key IS NOT new.constituency_key
        OR old.booth IS NOT new.booth OR old.ward IS NOT new.ward
      BEGIN
        UPDATE voter_counts SET version = version + 1 WHERE workspace_id IN (old.workspace_id, new.workspace_id);
      END`.execute(db);
    await db.schema.alterTable('voter_counts').dropColumn('bulk').execute();
  }
  await db.schema.dropTable('voter_changes').execute();
}
