import type { Kysely } from 'kysely';

/**
 * An office's second week (the contract's fifth part):
 * - `voter_imports.mapping`: a job's upload options (JSON `{ mapping, language }`: its heading -> field mapping
 *   and the language of its rows), applied when it
 *   runs; `voter_imports.warnings`: the cells it left out of the rows it kept (JSON, as `errors`).
 * - `workspaces.import_mapping`: the workspace's last mapping (JSON), which the console offers again.
 * - `workspaces.default_language`: the language of a voter without one (`en` or `hi`).
 * - `voter_tag_jobs.set_values`: a bulk edit's `set` (JSON `{ language?, support_level?, fields? }`).
 * - `inbound_messages.withheld`: 1 for a voter's answer to a survey question that saves to `support_level` or to
 *   a sensitive field: volunteers never read its text, and webhooks and the live stream never carry it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('voter_imports').addColumn('mapping', 'text').execute();
  await db.schema
    .alterTable('voter_imports')
    .addColumn('warnings', 'text', (c) => c.notNull().defaultTo('[]'))
    .execute();
  await db.schema.alterTable('workspaces').addColumn('import_mapping', 'text').execute();
  await db.schema
    .alterTable('workspaces')
    .addColumn('default_language', 'varchar(2)', (c) => c.notNull().defaultTo('en'))
    .execute();
  await db.schema
    .alterTable('inbound_messages')
    .addColumn('withheld', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.alterTable('voter_tag_jobs').addColumn('set_values', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('voter_tag_jobs').dropColumn('set_values').execute();
  await db.schema.alterTable('inbound_messages').dropColumn('withheld').execute();
  await db.schema.alterTable('workspaces').dropColumn('default_language').execute();
  await db.schema.alterTable('workspaces').dropColumn('import_mapping').execute();
  await db.schema.alterTable('voter_imports').dropColumn('warnings').execute();
  await db.schema.alterTable('voter_imports').dropColumn('mapping').execute();
}
