import { type Kysely, sql } from 'kysely';
import { randomBytes } from 'node:crypto';
import { bigintType, timestampType, withId } from './helpers.ts';

/**
 * Personal data (the contract's fourth part, "Personal data: the DPDP Act 2023 and its Rules"):
 * - the workspace's `public_id` (random: the public privacy page's address) and its retention periods;
 * - each voter's consent (`consent_status` given|withdrawn|unknown, the notice version, its source and time);
 * - `privacy_notices` (one per workspace), `privacy_requests` (data-principal requests), `privacy_codes` (the
 *   public form's one-time codes, kept as HMACs of address and code) and `breaches` (the breach register).
 * An erased person's opt-outs keep only a keyed hash of the address (`opt_outs.address` = `#<hmac>`).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await workspaceColumns(db);
  await voterConsent(db);
  await noticeAndRequests(db);
  await breaches(db);
}

async function workspaceColumns(db: Kysely<unknown>) {
  await db.schema.alterTable('workspaces').addColumn('public_id', 'varchar(32)').execute();
  for (const column of ['messages_days', 'inbound_days', 'visits_days', 'survey_responses_days'])
    await db.schema.alterTable('workspaces').addColumn(`retention_${column}`, 'integer').execute();
  const rows = await sql<{ id: number }>`SELECT id FROM workspaces`.execute(db);
  for (const row of rows.rows)
    await sql`UPDATE workspaces SET public_id = ${randomBytes(12).toString('base64url')} WHERE id = ${row.id}`.execute(
      db,
    );
  await db.schema
    .createIndex('workspaces_public_id_uq')
    .on('workspaces')
    .column('public_id')
    .unique()
    .execute();
}

async function voterConsent(db: Kysely<unknown>) {
  const ts = timestampType(db);
  await db.schema
    .alterTable('voters')
    .addColumn('consent_status', 'varchar(10)', (c) => c.notNull().defaultTo('unknown'))
    .execute();
  await db.schema.alterTable('voters').addColumn('consent_notice_version', 'integer').execute();
  await db.schema.alterTable('voters').addColumn('consent_source', 'varchar(10)').execute();
  await db.schema.alterTable('voters').addColumn('consent_at', ts).execute();
  // PRIVACY_REQUIRE_CONSENT: the delivery gate finds the consenting voters of a batch's addresses from these
  // (partial: a roll without consent recorded costs its imports nothing).
  await sql`CREATE INDEX voters_consent_phone_idx ON voters (workspace_id, phone) WHERE consent_status = 'given'`.execute(
    db,
  );
  await sql`CREATE INDEX voters_consent_email_idx ON voters (workspace_id, email) WHERE consent_status = 'given'`.execute(
    db,
  );
}

async function noticeAndRequests(db: Kysely<unknown>) {
  const ref = bigintType(db);
  const ts = timestampType(db);

  await db.schema
    .createTable('privacy_notices')
    .addColumn('workspace_id', ref, (c) => c.primaryKey().references('workspaces.id').onDelete('cascade'))
    .addColumn('version', 'integer', (c) => c.notNull())
    // JSON: { "<lang>": text }.
    .addColumn('texts', 'text', (c) => c.notNull())
    .addColumn('contact', 'text', (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();

  await withId(db, db.schema.createTable('privacy_requests'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('type', 'varchar(12)', (c) => c.notNull())
    .addColumn('voter_id', ref, (c) => c.references('voters.id').onDelete('set null'))
    // E.164 or a lower-cased email; `#<hmac>` once the person is erased.
    .addColumn('address', 'varchar(254)', (c) => c.notNull())
    .addColumn('status', 'varchar(10)', (c) => c.notNull())
    .addColumn('received_via', 'varchar(12)', (c) => c.notNull())
    .addColumn('due_at', ts, (c) => c.notNull())
    .addColumn('completed_at', ts)
    .addColumn('note', 'text')
    // JSON: what the erasure removed and what remains (the answer of POST .../erase).
    .addColumn('erasure', 'text')
    .addColumn('due_soon_sent_at', ts)
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('privacy_requests_workspace_idx')
    .on('privacy_requests')
    .columns(['workspace_id', 'id'])
    .execute();
  await db.schema
    .createIndex('privacy_requests_due_idx')
    .on('privacy_requests')
    .columns(['status', 'due_at'])
    .execute();

  await withId(db, db.schema.createTable('privacy_codes'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    // HMAC of the address: the table never holds it.
    .addColumn('address_hash', 'varchar(64)', (c) => c.notNull())
    .addColumn('code_hash', 'varchar(64)', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('expires_at', ts, (c) => c.notNull())
    .addColumn('used_at', ts)
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('privacy_codes_address_idx')
    .on('privacy_codes')
    .columns(['workspace_id', 'address_hash', 'id'])
    .execute();
}

async function breaches(db: Kysely<unknown>) {
  const ref = bigintType(db);
  const ts = timestampType(db);
  await withId(db, db.schema.createTable('breaches'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('detected_at', ts, (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull())
    .addColumn('affected_count', 'integer')
    .addColumn('board_notified_at', ts)
    .addColumn('people_notified_at', ts)
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('breaches_workspace_idx')
    .on('breaches')
    .columns(['workspace_id', 'id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['breaches', 'privacy_codes', 'privacy_requests', 'privacy_notices'])
    await db.schema.dropTable(table).execute();
  await db.schema.dropIndex('voters_consent_phone_idx').execute();
  await db.schema.dropIndex('voters_consent_email_idx').execute();
  for (const column of ['consent_at', 'consent_source', 'consent_notice_version', 'consent_status'])
    await db.schema.alterTable('voters').dropColumn(column).execute();
  await db.schema.dropIndex('workspaces_public_id_uq').execute();
  for (const column of [
    'public_id',
    'retention_messages_days',
    'retention_inbound_days',
    'retention_visits_days',
    'retention_survey_responses_days',
  ])
    await db.schema.alterTable('workspaces').dropColumn(column).execute();
}
