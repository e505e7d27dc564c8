import type { Kysely } from 'kysely';
import { bigintType, timestampType, withId } from './helpers.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await createWebhooks(db);
  await createGrievances(db);
  await createPayments(db);
}

/** Webhook endpoints, their events (an outbox) and their deliveries. */
async function createWebhooks(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  await withId(db, db.schema.createTable('webhooks'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('url', 'varchar(2048)', (c) => c.notNull())
    .addColumn('description', 'varchar(500)')
    // JSON text: the subscribed event types.
    .addColumn('events', 'text', (c) => c.notNull())
    // AES-256-GCM of the signing secret under a key derived from APP_KEY; a dump alone does not reveal it.
    .addColumn('secret_encrypted', 'text', (c) => c.notNull())
    .addColumn('disabled_at', ts)
    .addColumn('disabled_reason', 'varchar(200)')
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('webhooks_workspace_idx')
    .on('webhooks')
    .columns(['workspace_id', 'id'])
    .execute();

  // The outbox: one row per event, written in the transaction of the change that causes it.
  await withId(db, db.schema.createTable('webhook_events'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('type', 'varchar(50)', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('webhook_events_workspace_idx')
    .on('webhook_events')
    .columns(['workspace_id', 'id'])
    .execute();

  // One delivery per (event, subscribed endpoint), claimed by the delivery workers with a lease.
  await withId(db, db.schema.createTable('webhook_deliveries'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('webhook_id', ref, (c) => c.notNull().references('webhooks.id').onDelete('cascade'))
    .addColumn('event_id', ref, (c) => c.notNull().references('webhook_events.id').onDelete('cascade'))
    .addColumn('status', 'varchar(20)', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', ts, (c) => c.notNull())
    .addColumn('last_attempt_at', ts)
    .addColumn('last_status_code', 'integer')
    .addColumn('last_error', 'varchar(500)')
    .addColumn('claimed_by', 'varchar(100)')
    .addColumn('lease_until', ts)
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_due_idx')
    .on('webhook_deliveries')
    .columns(['status', 'next_attempt_at'])
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_webhook_idx')
    .on('webhook_deliveries')
    .columns(['webhook_id', 'id'])
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_event_idx')
    .on('webhook_deliveries')
    .column('event_id')
    .execute();
}

/** Grievances. */
async function createGrievances(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  await withId(db, db.schema.createTable('grievances'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('title', 'varchar(200)', (c) => c.notNull())
    .addColumn('description', 'varchar(5000)')
    .addColumn('category', 'varchar(100)')
    .addColumn('status', 'varchar(20)', (c) => c.notNull())
    .addColumn('priority', 'varchar(10)', (c) => c.notNull())
    .addColumn('voter_id', ref, (c) => c.references('voters.id').onDelete('set null'))
    .addColumn('reporter_name', 'varchar(200)')
    .addColumn('reporter_phone', 'varchar(20)')
    .addColumn('constituency', 'varchar(120)')
    .addColumn('constituency_key', 'varchar(120)')
    .addColumn('booth', 'varchar(20)')
    .addColumn('ward', 'varchar(20)')
    .addColumn('assigned_to', ref, (c) => c.references('users.id').onDelete('set null'))
    .addColumn('resolution_note', 'varchar(5000)')
    .addColumn('due_at', ts, (c) => c.notNull())
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .addColumn('resolved_at', ts)
    .execute();
  await db.schema
    .createIndex('grievances_workspace_idx')
    .on('grievances')
    .columns(['workspace_id', 'id'])
    .execute();
  await db.schema
    .createIndex('grievances_status_due_idx')
    .on('grievances')
    .columns(['workspace_id', 'status', 'due_at'])
    .execute();
  await db.schema
    .createIndex('grievances_assigned_idx')
    .on('grievances')
    .columns(['workspace_id', 'assigned_to'])
    .execute();
}

/** Payments for credits. */
async function createPayments(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  await withId(db, db.schema.createTable('payments'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('status', 'varchar(20)', (c) => c.notNull())
    .addColumn('gateway', 'varchar(20)', (c) => c.notNull())
    .addColumn('sms_credits', ref, (c) => c.notNull())
    .addColumn('whatsapp_credits', ref, (c) => c.notNull())
    .addColumn('email_credits', ref, (c) => c.notNull())
    .addColumn('created_by', ref, (c) => c.references('users.id').onDelete('set null'))
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('completed_at', ts)
    .execute();
  await db.schema
    .createIndex('payments_workspace_idx')
    .on('payments')
    .columns(['workspace_id', 'id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['payments', 'grievances', 'webhook_deliveries', 'webhook_events', 'webhooks']) {
    await db.schema.dropTable(table).execute();
  }
}
