import { type Kysely, sql } from 'kysely';
import { bigintType, timestampType, withId } from './helpers.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await createCampaigns(db);
  await createMessages(db);
  await createIdempotencyKeys(db);
}

/** Campaigns, and the indexes the worker finds due ones by. */
async function createCampaigns(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  await withId(db, db.schema.createTable('campaigns'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('name', 'varchar(200)', (c) => c.notNull())
    .addColumn('channel', 'varchar(20)', (c) => c.notNull())
    .addColumn('message', 'text', (c) => c.notNull())
    .addColumn('subject', 'varchar(200)')
    .addColumn('media_url', 'varchar(2000)')
    .addColumn('template_id', 'varchar(200)')
    // draft | scheduled | queued (credits reserved, outbox not yet filled) | sending | completed | cancelled
    .addColumn('status', 'varchar(20)', (c) => c.notNull())
    .addColumn('segment_id', ref)
    // JSON array of the explicit recipients, normalised and deduplicated; null when none were given.
    .addColumn('recipients', 'text')
    // Voters with a higher id joined the roll after the campaign was counted and do not receive it.
    .addColumn('voter_id_limit', ref)
    // Credits per message (SMS segments; 1 for WhatsApp and email; 0 for IVR).
    .addColumn('unit_cost', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('total_recipients', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('reserved_credits', ref, (c) => c.notNull().defaultTo(0))
    .addColumn('status_reason', 'varchar(200)')
    // A worker filling the outbox from this campaign holds it until then.
    .addColumn('lease_until', ts)
    .addColumn('scheduled_at', ts)
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .addColumn('started_at', ts)
    .addColumn('completed_at', ts)
    .execute();
  await db.schema
    .createIndex('campaigns_workspace_idx')
    .on('campaigns')
    .columns(['workspace_id', 'id'])
    .execute();
  // The worker looks for campaigns to start (scheduled, due) and to expand (queued).
  await db.schema
    .createIndex('campaigns_pending_idx')
    .on('campaigns')
    .columns(['status', 'scheduled_at'])
    .where(sql<boolean>`status in ('scheduled', 'queued', 'sending')`)
    .execute();
}

/** The outbox: one row per message, before any provider sees it. */
async function createMessages(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  // The outbox: every message is a row before any provider sees it. No foreign keys on purpose: PostgreSQL
  // checks each with a per-row trigger, which made filling the outbox from a million-voter segment 15 times
  // slower than the INSERT ... SELECT itself; the rows are only ever written by the service, with ids it
  // has just read.
  await withId(db, db.schema.createTable('messages'))
    .addColumn('workspace_id', ref, (c) => c.notNull())
    .addColumn('campaign_id', ref)
    .addColumn('channel', 'varchar(20)', (c) => c.notNull())
    .addColumn('to', 'varchar(254)', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('subject', 'varchar(200)')
    .addColumn('media_url', 'varchar(2000)')
    .addColumn('template_id', 'varchar(200)')
    // queued -> sent -> delivered | failed; queued -> failed; nothing leaves delivered or failed.
    .addColumn('status', 'varchar(20)', (c) => c.notNull())
    .addColumn('cost', 'integer', (c) => c.notNull().defaultTo(0))
    // The provider that accepted the message (set when it is handed over).
    .addColumn('provider', 'varchar(40)')
    .addColumn('provider_message_id', 'varchar(200)')
    // Claim: a worker owns a queued row until lease_until; next_attempt_at moves with the lease so an
    // expired claim is simply due again.
    .addColumn('claimed_by', 'varchar(100)')
    .addColumn('lease_until', ts)
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', ts, (c) => c.notNull())
    .addColumn('error', 'varchar(500)')
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .addColumn('sent_at', ts)
    .addColumn('delivered_at', ts)
    .addColumn('failed_at', ts)
    .execute();
  await db.schema
    .createIndex('messages_workspace_idx')
    .on('messages')
    .columns(['workspace_id', 'id'])
    .execute();
  // One message per recipient per campaign: expansion can be repeated safely and deduplicates.
  await db.schema
    .createIndex('messages_campaign_to_uq')
    .on('messages')
    .columns(['campaign_id', 'to'])
    .unique()
    .execute();
  // Due work for the claim loop; only queued rows are in it.
  await db.schema
    .createIndex('messages_due_idx')
    .on('messages')
    .columns(['next_attempt_at', 'id'])
    .where(sql<boolean>`status = 'queued'`)
    .execute();
  // What a campaign has left to send (completion, cancel) without walking its sent rows.
  await db.schema
    .createIndex('messages_campaign_queued_idx')
    .on('messages')
    .column('campaign_id')
    .where(sql<boolean>`status = 'queued'`)
    .execute();
  // Sent rows waiting for a delivery report (the sandbox settles them by age).
  await db.schema
    .createIndex('messages_sent_idx')
    .on('messages')
    .columns(['sent_at', 'id'])
    .where(sql<boolean>`status = 'sent'`)
    .execute();
}

/** The answers kept per Idempotency-Key. */
async function createIdempotencyKeys(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  await withId(db, db.schema.createTable('idempotency_keys'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('key', 'varchar(255)', (c) => c.notNull())
    // SHA-256 of method, path and body: the same key with another request is refused.
    .addColumn('request_hash', 'char(64)', (c) => c.notNull())
    // in_flight | done
    .addColumn('status', 'varchar(20)', (c) => c.notNull())
    .addColumn('response_status', 'integer')
    .addColumn('response_body', 'text')
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('idempotency_keys_uq')
    .on('idempotency_keys')
    .columns(['workspace_id', 'key'])
    .unique()
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['idempotency_keys', 'messages', 'campaigns']) {
    await db.schema.dropTable(table).execute();
  }
}
