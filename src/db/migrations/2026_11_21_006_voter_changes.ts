import { type Kysely, sql } from 'kysely';
import { bigintType, isPostgres } from './helpers.ts';

/**
 * `voter_changes`: what each small change did to the columns that lists filter and search on, keyed by the
 * `voter_counts.version` it produced. A list that remembered an exact total and page starts for an older
 * version brings them forward from these rows instead of counting again (see the README, "Voters").
 *
 * - One row per changed voter, with the values before (`old_*`, all null for a create) and after (`new_*`,
 *   all null for a delete). A version with no rows (a bulk change, a voter moved between workspaces, rows
 *   pruned) means "count again"; so does any gap.
 * - Bulk changes log nothing: on PostgreSQL a statement of more than 100 rows (the triggers are
 *   statement-level); on SQLite while `voter_counts.bulk` is set, which an import does for each of its
 *   transactions.
 * - Rows more than 256 versions old are pruned by the same triggers.
 */
const KEEP_VERSIONS = 256;
const LOG_AT_MOST = 100;
const fields = ['name', 'email', 'phone', 'constituency_key', 'booth', 'ward'] as const;
const cols = (prefix: string) => fields.map((f) => `${prefix}${f}`).join(', ');
const values = (row: string) => fields.map((f) => `${row}.${f}`).join(', ');
const nulls = fields.map(() => 'NULL').join(', ');

export async function up(db: Kysely<unknown>): Promise<void> {
  let table = db.schema
    .createTable('voter_changes')
    .addColumn('workspace_id', bigintType(db), (c) => c.notNull())
    .addColumn('version', bigintType(db), (c) => c.notNull())
    .addColumn('voter_id', bigintType(db), (c) => c.notNull());
  for (const prefix of ['old_', 'new_'])
    for (const f of fields) table = table.addColumn(`${prefix}${f}`, 'text');
  table = table.addPrimaryKeyConstraint('voter_changes_pkey', ['workspace_id', 'version', 'voter_id']);
  if (!isPostgres(db)) table = table.modifyEnd(sql`WITHOUT ROWID`);
  await table.execute();

  if (isPostgres(db)) {
    const prune = `DELETE FROM voter_changes v USING c
      WHERE v.workspace_id = c.workspace_id AND v.version <= c.version - ${KEEP_VERSIONS}`;
    // Creates and deletes: the count moves by the rows of the statement, and each row is logged on its side.
    for (const [fn, rows, sign, prefix] of [
      ['voter_counts_inserted', 'new_rows', '+', 'new_'],
      ['voter_counts_deleted', 'old_rows', '-', 'old_'],
    ] as const) {
      const bump = `UPDATE voter_counts c SET total = c.total ${sign} n.changed, version = c.version + 1
              FROM (SELECT workspace_id, count(*) AS changed FROM ${rows} GROUP BY workspace_id) n
              WHERE c.workspace_id = n.workspace_id`;
      await sql
        .raw(
          `CREATE OR REPLACE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF (SELECT count(*) FROM (SELECT 1 FROM ${rows} LIMIT ${LOG_AT_MOST + 1}) s) <= ${LOG_AT_MOST} THEN
          WITH c AS (${bump} RETURNING c.workspace_id, c.version),
          logged AS (
            INSERT INTO voter_changes (workspace_id, version, voter_id, ${cols(prefix)})
              SELECT c.workspace_id, c.version, r.id, ${values('r')}
              FROM c JOIN ${rows} r ON r.workspace_id = c.workspace_id)
          ${prune};
        ELSE
          ${bump};
        END IF;
        RETURN NULL;
      END $$`,
        )
        .execute(db);
    }
    const changed = `(n.workspace_id, ${values('n')}) IS DISTINCT FROM (o.workspace_id, ${values('o')})`;
    await sql
      .raw(
        `CREATE OR REPLACE FUNCTION voter_counts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF (SELECT count(*) FROM (SELECT 1 FROM new_rows LIMIT ${LOG_AT_MOST + 1}) s) <= ${LOG_AT_MOST} THEN
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
            INSERT INTO voter_changes (workspace_id, version, voter_id, ${cols('old_')}, ${cols('new_')})
              SELECT c.workspace_id, c.version, d.id, ${cols('d.old_')}, ${cols('d.new_')}
              FROM c JOIN d ON d.workspace_id = c.workspace_id
              WHERE NOT EXISTS (SELECT 1 FROM d m WHERE m.workspace_id <> m.old_workspace_id
                                  AND c.workspace_id IN (m.workspace_id, m.old_workspace_id)))
          ${prune};
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
    return;
  }

  await db.schema
    .alterTable('voter_counts')
    .addColumn('bulk', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  const log = (workspace: string, voter: string, old: string, now: string, when = '') =>
    `INSERT INTO voter_changes (workspace_id, version, voter_id, ${cols('old_')}, ${cols('new_')})
       SELECT workspace_id, version, ${voter}, ${old}, ${now} FROM voter_counts
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
      ${log('new.workspace_id', 'new.id', nulls, values('new'))}
    END`,
    )
    .execute(db);
  await sql
    .raw(
      `CREATE TRIGGER voters_count_delete AFTER DELETE ON voters BEGIN
      UPDATE voter_counts SET total = total - 1, version = version + 1 WHERE workspace_id = old.workspace_id;
      ${log('old.workspace_id', 'old.id', values('old'), nulls)}
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
        ${log('new.workspace_id', 'new.id', values('old'), values('new'), ' AND old.workspace_id = new.workspace_id')}
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
