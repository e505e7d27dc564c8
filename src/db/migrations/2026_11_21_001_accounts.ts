import { type Kysely, sql } from 'kysely';
import { bigintType, timestampType, withId } from './helpers.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);

  await withId(db, db.schema.createTable('workspaces'))
    .addColumn('name', 'varchar(200)', (c) => c.notNull())
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();

  await withId(db, db.schema.createTable('users'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('name', 'varchar(200)', (c) => c.notNull())
    .addColumn('email', 'varchar(254)', (c) => c.notNull().unique())
    .addColumn('phone', 'varchar(20)', (c) => c.unique())
    .addColumn('password_hash', 'varchar(200)', (c) => c.notNull())
    .addColumn('role', 'varchar(20)', (c) => c.notNull())
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema.createIndex('users_workspace_idx').on('users').columns(['workspace_id', 'id']).execute();

  await withId(db, db.schema.createTable('api_tokens'))
    .addColumn('user_id', ref, (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('token_hash', 'char(64)', (c) => c.notNull())
    .addColumn('name', 'varchar(100)', (c) => c.notNull())
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('expires_at', ts)
    .addColumn('revoked_at', ts)
    .execute();
  await db.schema.createIndex('api_tokens_user_idx').on('api_tokens').column('user_id').execute();

  await withId(db, db.schema.createTable('otp_codes'))
    .addColumn('phone', 'varchar(20)', (c) => c.notNull())
    .addColumn('code_hash', 'char(64)', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('expires_at', ts, (c) => c.notNull())
    .addColumn('consumed_at', ts)
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();
  await db.schema.createIndex('otp_codes_phone_idx').on('otp_codes').columns(['phone', 'id']).execute();

  await db.schema
    .createTable('credit_balances')
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('channel', 'varchar(20)', (c) => c.notNull())
    .addColumn('balance', ref, (c) => c.notNull().check(sql`balance >= 0`))
    .addPrimaryKeyConstraint('credit_balances_pk', ['workspace_id', 'channel'])
    .execute();

  await withId(db, db.schema.createTable('credit_ledger'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('channel', 'varchar(20)', (c) => c.notNull())
    .addColumn('kind', 'varchar(20)', (c) => c.notNull())
    .addColumn('amount', ref, (c) => c.notNull())
    .addColumn('reference', 'varchar(200)')
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('credit_ledger_workspace_idx')
    .on('credit_ledger')
    .columns(['workspace_id', 'id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of [
    'credit_ledger',
    'credit_balances',
    'otp_codes',
    'api_tokens',
    'users',
    'workspaces',
  ]) {
    await db.schema.dropTable(table).execute();
  }
}
