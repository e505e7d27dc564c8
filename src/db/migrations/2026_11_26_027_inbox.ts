import { type Kysely, sql } from 'kysely';
import { isPostgres } from './helpers.ts';

/** The voter's fields a conversation carries for the inbox's filters and search, and where they come from. */
const copied: Array<[conversation: string, voter: string]> = [
  ['voter_name', 'name'],
  ['voter_ward', 'ward'],
  ['voter_booth', 'booth'],
  ['voter_constituency_key', 'constituency_key'],
];

/**
 * The inbox at a busy office's size (100,000 conversations):
 * - A member's conversations in the list's order, with the columns its filters test (status, unread,
 *   channel): a volunteer's page and its count read this index alone, with no sort.
 * - The linked voter's name, ward, booth and constituency key on the conversation, so that the inbox's
 *   search and place filters test the conversation's own row instead of looking up each voter (2,000
 *   primary-key lookups for a volunteer's inbox took 26 ms on PostgreSQL). Triggers on voters keep them in
 *   step with the voter (an edit through the API or an import's merge); a deleted voter unlinks.
 * - `live_events` by age: the worker's prune deletes what is older than an hour without reading the table.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('live_events_created_idx').on('live_events').columns(['created_at']).execute();
  await db.schema
    .createIndex('conversations_inbox_idx')
    .on('conversations')
    .columns(['workspace_id', 'assigned_to', 'last_message_at', 'id', 'status', 'unread_count', 'channel'])
    .execute();
  for (const [column] of copied)
    await db.schema.alterTable('conversations').addColumn(column, 'varchar(200)').execute();
  await db.schema.createIndex('conversations_voter_idx').on('conversations').columns(['voter_id']).execute();
  await sql
    .raw(
      `UPDATE conversations SET ${copied
        .map(([c, v]) => `${c} = (SELECT ${v} FROM voters WHERE voters.id = conversations.voter_id)`)
        .join(', ')} WHERE voter_id IS NOT NULL`,
    )
    .execute(db);

  if (isPostgres(db)) {
    const differ = `(${copied.map(([c]) => `c.${c}`).join(', ')}) IS DISTINCT FROM (${copied.map(([, v]) => `n.${v}`).join(', ')})`;
    await sql
      .raw(
        `CREATE FUNCTION conversations_voter_updated() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           UPDATE conversations c SET ${copied.map(([c, v]) => `${c} = n.${v}`).join(', ')}
             FROM new_rows n WHERE c.voter_id = n.id AND ${differ};
           RETURN NULL;
         END $$`,
      )
      .execute(db);
    await sql
      .raw(
        `CREATE FUNCTION conversations_voter_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           UPDATE conversations c SET voter_id = NULL, ${copied.map(([c]) => `${c} = NULL`).join(', ')}
             FROM old_rows o WHERE c.voter_id = o.id;
           RETURN NULL;
         END $$`,
      )
      .execute(db);
    await sql
      .raw(
        `CREATE TRIGGER voters_conversations_update AFTER UPDATE ON voters REFERENCING NEW TABLE AS new_rows
         FOR EACH STATEMENT EXECUTE FUNCTION conversations_voter_updated()`,
      )
      .execute(db);
    await sql
      .raw(
        `CREATE TRIGGER voters_conversations_delete AFTER DELETE ON voters REFERENCING OLD TABLE AS old_rows
         FOR EACH STATEMENT EXECUTE FUNCTION conversations_voter_deleted()`,
      )
      .execute(db);
    return;
  }
  await sql
    .raw(
      `CREATE TRIGGER voters_conversations_update AFTER UPDATE OF ${copied.map(([, v]) => v).join(', ')} ON voters
       WHEN ${copied.map(([, v]) => `old.${v} IS NOT new.${v}`).join(' OR ')}
       BEGIN
         UPDATE conversations SET ${copied.map(([c, v]) => `${c} = new.${v}`).join(', ')} WHERE voter_id = new.id;
       END`,
    )
    .execute(db);
  await sql
    .raw(
      `CREATE TRIGGER voters_conversations_delete AFTER DELETE ON voters
       BEGIN
         UPDATE conversations SET voter_id = NULL, ${copied.map(([c]) => `${c} = NULL`).join(', ')}
           WHERE voter_id = old.id;
       END`,
    )
    .execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (isPostgres(db)) {
    await sql.raw('DROP TRIGGER voters_conversations_update ON voters').execute(db);
    await sql.raw('DROP TRIGGER voters_conversations_delete ON voters').execute(db);
    await sql.raw('DROP FUNCTION conversations_voter_updated()').execute(db);
    await sql.raw('DROP FUNCTION conversations_voter_deleted()').execute(db);
  } else {
    await sql.raw('DROP TRIGGER voters_conversations_update').execute(db);
    await sql.raw('DROP TRIGGER voters_conversations_delete').execute(db);
  }
  await db.schema.dropIndex('conversations_voter_idx').execute();
  for (const [column] of copied) await db.schema.alterTable('conversations').dropColumn(column).execute();
  await db.schema.dropIndex('conversations_inbox_idx').execute();
  await db.schema.dropIndex('live_events_created_idx').execute();
}
