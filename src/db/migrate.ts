import { Kysely, type Migration, type MigrationResultSet, Migrator, PostgresDialect } from 'kysely';
import type { Db } from './connect.ts';
import type { Database } from './schema.ts';
import { analyze } from './sqlite-statistics.ts';
import * as accounts from './migrations/2026_11_21_001_accounts.ts';
import * as voters from './migrations/2026_11_21_002_voters.ts';
import * as messaging from './migrations/2026_11_21_003_messaging.ts';
import * as webhooksGrievancesPayments from './migrations/2026_11_21_004_webhooks_grievances_payments.ts';
import * as voterVersions from './migrations/2026_11_21_005_voter_versions.ts';
import * as voterChanges from './migrations/2026_11_21_006_voter_changes.ts';
import * as voterBlocks from './migrations/2026_11_21_007_voter_blocks.ts';
import * as auditLog from './migrations/2026_11_24_008_audit_log.ts';
import * as messageErrorCode from './migrations/2026_11_24_009_message_error_code.ts';
import * as teamAccess from './migrations/2026_11_24_010_team_access.ts';
import * as voterImports from './migrations/2026_11_24_011_voter_imports.ts';
import * as dropVoterChanges from './migrations/2026_11_24_012_drop_voter_changes.ts';
import * as messageRecipientIndex from './migrations/2026_11_24_013_message_recipient_index.ts';
import * as consent from './migrations/2026_11_24_014_consent.ts';
import * as templates from './migrations/2026_11_24_015_templates.ts';
import * as voterImportIp from './migrations/2026_11_24_016_voter_import_ip.ts';
import * as voterFilterOrder from './migrations/2026_11_24_017_voter_filter_order.ts';
import * as messageDueByChannel from './migrations/2026_11_25_018_message_due_by_channel.ts';
import * as campaignRetryOf from './migrations/2026_11_25_019_campaign_retry_of.ts';
import * as placeNames from './migrations/2026_11_25_020_place_names.ts';
import * as inboundProviderId from './migrations/2026_11_25_021_inbound_provider_id.ts';
import * as webhookBreaker from './migrations/2026_11_25_022_webhook_breaker.ts';
import * as messageDueByWorkspace from './migrations/2026_11_25_023_message_due_by_workspace.ts';
import * as channelAccounts from './migrations/2026_11_25_024_channel_accounts.ts';
import * as conversations from './migrations/2026_11_25_025_conversations.ts';
import * as liveEvents from './migrations/2026_11_25_026_live_events.ts';
import * as inbox from './migrations/2026_11_26_027_inbox.ts';
import * as voterSearch from './migrations/2026_11_26_028_voter_search.ts';
import * as unconfirmedMessages from './migrations/2026_11_27_029_unconfirmed_messages.ts';
import * as channelDefaults from './migrations/2026_11_27_030_channel_defaults.ts';
import * as campaignLastError from './migrations/2026_11_27_031_campaign_last_error.ts';
import * as createdBy from './migrations/2026_11_27_032_created_by.ts';
import * as workspaceTimezone from './migrations/2026_11_27_033_workspace_timezone.ts';
import * as places from './migrations/2026_11_27_034_places.ts';
import * as voterRecord from './migrations/2026_11_28_035_voter_record.ts';
import * as surveys from './migrations/2026_11_28_036_surveys.ts';
import * as voterValueCounts from './migrations/2026_11_28_037_voter_value_counts.ts';
import * as surveyTriggerRepeats from './migrations/2026_11_28_038_survey_trigger_repeats.ts';
import * as voterSideRows from './migrations/2026_11_29_039_voter_side_rows.ts';
import * as gatewayRules from './migrations/2026_12_07_040_gateway_rules.ts';
import * as secondWeek from './migrations/2026_12_07_041_second_week.ts';
import * as channelLog from './migrations/2026_12_07_042_channel_log.ts';
import * as fieldWork from './migrations/2026_12_07_043_field_work.ts';
import * as privacy from './migrations/2026_12_07_044_privacy.ts';
import * as turnoutCounts from './migrations/2026_12_08_045_turnout_counts.ts';

/** Every migration, in order. A static list: no directory scanning, so bundling and tsx both work. */
export const migrations: Record<string, Migration> = {
  '2026_11_21_001_accounts': accounts,
  '2026_11_21_002_voters': voters,
  '2026_11_21_003_messaging': messaging,
  '2026_11_21_004_webhooks_grievances_payments': webhooksGrievancesPayments,
  '2026_11_21_005_voter_versions': voterVersions,
  '2026_11_21_006_voter_changes': voterChanges,
  '2026_11_21_007_voter_blocks': voterBlocks,
  '2026_11_24_008_audit_log': auditLog,
  '2026_11_24_009_message_error_code': messageErrorCode,
  '2026_11_24_010_team_access': teamAccess,
  '2026_11_24_011_voter_imports': voterImports,
  '2026_11_24_012_drop_voter_changes': dropVoterChanges,
  '2026_11_24_013_message_recipient_index': messageRecipientIndex,
  '2026_11_24_014_consent': consent,
  '2026_11_24_015_templates': templates,
  '2026_11_24_016_voter_import_ip': voterImportIp,
  '2026_11_24_017_voter_filter_order': voterFilterOrder,
  '2026_11_25_018_message_due_by_channel': messageDueByChannel,
  '2026_11_25_019_campaign_retry_of': campaignRetryOf,
  '2026_11_25_020_place_names': placeNames,
  '2026_11_25_021_inbound_provider_id': inboundProviderId,
  '2026_11_25_022_webhook_breaker': webhookBreaker,
  '2026_11_25_023_message_due_by_workspace': messageDueByWorkspace,
  '2026_11_25_024_channel_accounts': channelAccounts,
  '2026_11_25_025_conversations': conversations,
  '2026_11_25_026_live_events': liveEvents,
  '2026_11_26_027_inbox': inbox,
  '2026_11_26_028_voter_search': voterSearch,
  '2026_11_27_029_unconfirmed_messages': unconfirmedMessages,
  '2026_11_27_030_channel_defaults': channelDefaults,
  '2026_11_27_031_campaign_last_error': campaignLastError,
  '2026_11_27_032_created_by': createdBy,
  '2026_11_27_033_workspace_timezone': workspaceTimezone,
  '2026_11_27_034_places': places,
  '2026_11_28_035_voter_record': voterRecord,
  '2026_11_28_036_surveys': surveys,
  '2026_11_28_037_voter_value_counts': voterValueCounts,
  '2026_11_28_038_survey_trigger_repeats': surveyTriggerRepeats,
  '2026_11_29_039_voter_side_rows': voterSideRows,
  '2026_12_07_040_gateway_rules': gatewayRules,
  '2026_12_07_041_second_week': secondWeek,
  '2026_12_07_042_channel_log': channelLog,
  '2026_12_07_043_field_work': fieldWork,
  '2026_12_07_044_privacy': privacy,
  '2026_12_08_045_turnout_counts': turnoutCounts,
};

/**
 * Applies every pending migration. Given the service's Db, PostgreSQL's are applied through the bulk pool,
 * whose connections have no statement time limit: a migration that copies a state's roll (028 at 10,000,000
 * voters) takes minutes, and DB_STATEMENT_TIMEOUT_MS (with the client's read timeout after it) would cancel
 * it. The pool stays the Db's: this Kysely is not destroyed.
 */
export async function migrateToLatest(target: Db): Promise<MigrationResultSet> {
  const db =
    target.raw.dialect === 'postgres'
      ? new Kysely<Database>({ dialect: new PostgresDialect({ pool: target.raw.bulk }) })
      : target.kysely;
  const migrator = new Migrator({
    db: db as unknown as Kysely<unknown>,
    provider: { getMigrations: async () => migrations },
  });
  // SQLite: better-sqlite3 opens connections in defensive mode, which refuses `PRAGMA writable_schema`;
  // migration 035 needs it for SQLite's documented in-place schema edit (dropping a NOT NULL). Off for the
  // migrations only.
  const sqlite = target.raw.dialect === 'sqlite' ? target.raw.sqlite : undefined;
  sqlite?.unsafeMode(true);
  let result: MigrationResultSet;
  try {
    result = await migrator.migrateToLatest();
  } finally {
    sqlite?.unsafeMode(false);
  }
  if (result.error) throw result.error instanceof Error ? result.error : new Error(String(result.error));
  // SQLite: statistics for the tables as they are now (connect's `optimize` ran before the migrations, on a
  // new database before there were tables).
  if (sqlite) analyze(sqlite, 'PRAGMA optimize = 0x10002');
  return result;
}
