export type * from './schema.outreach.ts';
export type * from './schema.voters.ts';
export type * from './schema.surveys.ts';
export type * from './schema.field.ts';
export type * from './schema.privacy.ts';
import type {
  BreachTable,
  PrivacyCodeTable,
  PrivacyNoticeTable,
  PrivacyRequestTable,
} from './schema.privacy.ts';
import type { ColumnType, Generated, Insertable, Selectable } from 'kysely';
import type {
  CampaignStatus,
  CreditChannel,
  DeliveryStatus,
  GrievancePriority,
  GrievanceStatus,
  LedgerKind,
  MessageChannel,
  MessageErrorCode,
  MessageStatus,
  Role,
} from '../domain.ts';
import type {
  VoterBlockTable,
  VoterCountTable,
  VoterFieldTable,
  VoterFieldValueTable,
  VoterFtsTable,
  VoterImportFileTable,
  VoterImportTable,
  VoterSearchTable,
  VoterTable,
  VoterTagJobTable,
  VoterTagNameTable,
  VoterTagTable,
  VoterValueCountTable,
} from './schema.voters.ts';
import type {
  SurveyAnswerTable,
  SurveyKeywordTable,
  SurveyResponseTable,
  SurveyRunTable,
  SurveyTable,
} from './schema.surveys.ts';
import type {
  PollMarkTable,
  PollVotedTable,
  TurfMemberTable,
  TurfTable,
  VisitTable,
  VoterStampTable,
} from './schema.field.ts';
import type {
  OptOutTable,
  SilencePeriodTable,
  InboundMessageTable,
  TemplateTable,
  ChannelAccountTable,
  ChannelLogTable,
  ConversationTable,
  QuickReplyTable,
  LiveEventTable,
} from './schema.outreach.ts';

/**
 * Row types of every table. Timestamps are ISO 8601 UTC strings on both dialects (connect.ts makes
 * PostgreSQL's timestamptz come back as such); ids are numbers (int8 is parsed as a JS number).
 */

export interface Database {
  workspaces: WorkspaceTable;
  users: UserTable;
  api_tokens: ApiTokenTable;
  otp_codes: OtpCodeTable;
  credit_balances: CreditBalanceTable;
  credit_ledger: CreditLedgerTable;
  voters: VoterTable;
  voter_counts: VoterCountTable;
  voter_blocks: VoterBlockTable;
  /** PostgreSQL only (migration 037). */
  voter_value_counts: VoterValueCountTable;
  /** SQLite only: the FTS5 trigram index over voters (external content; rowid = voters.id). */
  voters_fts: VoterFtsTable;
  /** PostgreSQL only: each voter's searchable columns, with their trigram indexes (kept by triggers). */
  voter_search: VoterSearchTable;
  segments: SegmentTable;
  webhooks: WebhookTable;
  webhook_events: WebhookEventTable;
  webhook_deliveries: WebhookDeliveryTable;
  grievances: GrievanceTable;
  payments: PaymentTable;
  campaigns: CampaignTable;
  messages: MessageTable;
  idempotency_keys: IdempotencyKeyTable;
  audit_log: AuditLogTable;
  voter_imports: VoterImportTable;
  voter_import_files: VoterImportFileTable;
  opt_outs: OptOutTable;
  silence_periods: SilencePeriodTable;
  inbound_messages: InboundMessageTable;
  templates: TemplateTable;
  channel_accounts: ChannelAccountTable;
  channel_defaults: ChannelDefaultTable;
  channel_log: ChannelLogTable;
  conversations: ConversationTable;
  quick_replies: QuickReplyTable;
  live_events: LiveEventTable;
  places: PlaceTable;
  place_names: PlaceNameTable;
  voter_fields: VoterFieldTable;
  voter_field_values: VoterFieldValueTable;
  voter_tag_names: VoterTagNameTable;
  voter_tags: VoterTagTable;
  voter_tag_jobs: VoterTagJobTable;
  surveys: SurveyTable;
  survey_keywords: SurveyKeywordTable;
  survey_runs: SurveyRunTable;
  survey_responses: SurveyResponseTable;
  survey_answers: SurveyAnswerTable;
  turfs: TurfTable;
  turf_members: TurfMemberTable;
  visits: VisitTable;
  poll_marks: PollMarkTable;
  poll_voted: PollVotedTable;
  voter_stamps: VoterStampTable;
  privacy_notices: PrivacyNoticeTable;
  privacy_requests: PrivacyRequestTable;
  privacy_codes: PrivacyCodeTable;
  breaches: BreachTable;
}

/** A workspace's constituency, ward or booth (migration 034); `aliases` is a JSON array of strings. */
export interface PlaceTable {
  id: Generated<number>;
  workspace_id: number;
  kind: string;
  name: string;
  aliases: string;
  code: string | null;
  created_at: string;
  updated_at: string;
}
export type PlaceRow = Selectable<PlaceTable>;

/** Every name and alias of a place, as placeKey gives it: one place per (workspace, kind, key). */
export interface PlaceNameTable {
  workspace_id: number;
  kind: string;
  key: string;
  place_id: number;
}

/** The key that holds one default account per workspace and channel (migration 030). */
export interface ChannelDefaultTable {
  workspace_id: number;
  channel: string;
  channel_account_id: number;
  updated_at: string;
}

export interface WorkspaceTable {
  id: Generated<number>;
  name: string;
  created_at: string;
  /** An IANA time zone the console shows times in; null: QUIET_HOURS_TZ. */
  timezone: string | null;
  /** JSON: the last import's heading -> field mapping (migration 041). */
  import_mapping: ColumnType<string | null, string | null | undefined, string | null>;
  /** `en` or `hi`: a voter without a language gets it (migration 041). */
  default_language: ColumnType<string, string | undefined, string>;
  /** Random: the address of the workspace's public privacy page (migration 044). */
  public_id: ColumnType<string | null, string | undefined, string>;
  /** Retention in days (null: kept forever); migration 044. */
  retention_messages_days: ColumnType<number | null, number | null | undefined, number | null>;
  retention_inbound_days: ColumnType<number | null, number | null | undefined, number | null>;
  retention_visits_days: ColumnType<number | null, number | null | undefined, number | null>;
  retention_survey_responses_days: ColumnType<number | null, number | null | undefined, number | null>;
}

export interface UserTable {
  id: Generated<number>;
  workspace_id: number;
  name: string;
  /** Lower-cased; unique across the service. */
  email: string;
  /** E.164; unique across the service when set (it signs in by OTP). */
  phone: string | null;
  password_hash: string;
  role: Role;
  created_at: string;
  updated_at: string;
  /** Null while the user is active; set by a deactivation (every token is revoked at the same time). */
  deactivated_at: string | null;
  /** JSON `{ wards?, booths?, constituencies? }`: where new conversations go to this user; null: none. */
  coverage: ColumnType<string | null, string | null | undefined, string | null>;
}
export type UserRow = Selectable<UserTable>;

export interface ApiTokenTable {
  id: Generated<number>;
  user_id: number;
  workspace_id: number;
  /** Hex SHA-256 of the token's secret part; the secret itself is never stored. */
  token_hash: string;
  name: string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  /** Written at most once a minute per token (see auth.service authenticate). */
  last_used_at: string | null;
}

export interface OtpCodeTable {
  id: Generated<number>;
  phone: string;
  /** Hex HMAC-SHA256 (APP_KEY) of "<phone>:<code>". */
  code_hash: string;
  attempts: number;
  expires_at: string;
  consumed_at: string | null;
  created_at: string;
}

export interface CreditBalanceTable {
  workspace_id: number;
  channel: CreditChannel;
  balance: number;
}

export interface CreditLedgerTable {
  id: Generated<number>;
  workspace_id: number;
  channel: CreditChannel;
  kind: LedgerKind;
  /**
   * Signed change to the balance (a reserve is negative, a refund positive); for a `capture`, the reserved
   * credits that became final, which leaves the balance as it was.
   */
  amount: number;
  reference: string | null;
  created_at: string;
}
export type NewLedgerEntry = Insertable<CreditLedgerTable>;

export interface SegmentTable {
  id: Generated<number>;
  workspace_id: number;
  name: string;
  /** JSON text of a VoterFilters object. */
  filters: string;
  created_at: string;
  updated_at: string;
}

export interface WebhookTable {
  id: Generated<number>;
  workspace_id: number;
  url: string;
  description: string | null;
  /** JSON text: the subscribed event types. */
  events: string;
  /** `v1.<iv>.<tag>.<ciphertext>` (base64url): the signing secret under AES-256-GCM; never stored in clear. */
  secret_encrypted: string;
  /** Set when the endpoint stops receiving (a 410 answer, or PATCH active=false). */
  disabled_at: string | null;
  disabled_reason: string | null;
  /** Consecutive attempts that got no answer in time (the circuit breaker; 0 after any answer). */
  timeout_streak: ColumnType<number, number | undefined, number>;
  /** The breaker paused the endpoint until then: its deliveries wait, their retries unspent. */
  paused_until: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: string;
  updated_at: string;
}
export type WebhookRow = Selectable<WebhookTable>;

export interface WebhookEventTable {
  id: Generated<number>;
  workspace_id: number;
  type: string;
  /** JSON text of the event's `data`. */
  payload: string;
  created_at: string;
}
export type WebhookEventRow = Selectable<WebhookEventTable>;

export interface WebhookDeliveryTable {
  id: Generated<number>;
  workspace_id: number;
  webhook_id: number;
  event_id: number;
  status: DeliveryStatus;
  attempts: number;
  /** When a pending delivery is due (next attempt). */
  next_attempt_at: string;
  last_attempt_at: string | null;
  last_status_code: number | null;
  last_error: string | null;
  /** The worker holding the delivery, until `lease_until`; an expired lease is claimed again. */
  claimed_by: string | null;
  lease_until: string | null;
  created_at: string;
  updated_at: string;
}
export type WebhookDeliveryRow = Selectable<WebhookDeliveryTable>;

export interface GrievanceTable {
  id: Generated<number>;
  workspace_id: number;
  title: string;
  description: string | null;
  category: string | null;
  status: GrievanceStatus;
  priority: GrievancePriority;
  voter_id: number | null;
  reporter_name: string | null;
  /** E.164. */
  reporter_phone: string | null;
  constituency: string | null;
  /** Lower-cased constituency, for the case-insensitive exact filter. */
  constituency_key: string | null;
  booth: string | null;
  ward: string | null;
  assigned_to: number | null;
  resolution_note: string | null;
  due_at: string;
  created_at: string;
  updated_at: string;
  resolved_at: string | null;
  /** The user who opened it (migration 032); null before. */
  created_by: ColumnType<number | null, number | null | undefined, number | null>;
}
export type GrievanceRow = Selectable<GrievanceTable>;

export interface PaymentTable {
  id: Generated<number>;
  workspace_id: number;
  status: 'completed';
  gateway: 'sandbox';
  sms_credits: number;
  whatsapp_credits: number;
  email_credits: number;
  created_by: number | null;
  created_at: string;
  completed_at: string | null;
}
export type PaymentRow = Selectable<PaymentTable>;

export interface CampaignTable {
  id: Generated<number>;
  workspace_id: number;
  name: string;
  channel: MessageChannel;
  message: string;
  subject: string | null;
  media_url: string | null;
  template_id: string | null;
  status: CampaignStatus;
  segment_id: number | null;
  /** JSON array of the explicit recipients, normalised and deduplicated. */
  recipients: string | null;
  /** Voters above this id joined after the campaign was counted and are left out. */
  voter_id_limit: number | null;
  unit_cost: number;
  total_recipients: number;
  reserved_credits: number;
  status_reason: string | null;
  lease_until: string | null;
  scheduled_at: string | null;
  created_at: string;
  updated_at: string;
  started_at: string | null;
  completed_at: string | null;
  /** The campaign whose failures this one retries (retry-failed); at most one retry that is not cancelled. */
  retry_of: ColumnType<number | null, number | null | undefined, number | null>;
  /** The channel account its messages go through; null: the workspace's default, else the deployment's. */
  channel_account_id: ColumnType<number | null, number | null | undefined, number | null>;
  /** The latest failure of its messages (a refusal, or a retry's error): migration 031. */
  last_error_code: ColumnType<string | null, string | null | undefined, string | null>;
  last_error_message: ColumnType<string | null, string | null | undefined, string | null>;
  last_error_at: ColumnType<string | null, string | null | undefined, string | null>;
}
export type CampaignRow = Selectable<CampaignTable>;

export interface MessageTable {
  id: Generated<number>;
  workspace_id: number;
  campaign_id: number | null;
  channel: MessageChannel;
  to: string;
  body: string;
  subject: string | null;
  media_url: string | null;
  template_id: string | null;
  status: MessageStatus;
  cost: number;
  provider: string | null;
  provider_message_id: string | null;
  claimed_by: string | null;
  lease_until: string | null;
  attempts: number;
  next_attempt_at: string;
  /** The human-readable reason of a failure (the API's `error_message`). */
  error: string | null;
  /** Set with `status: 'failed'` only. */
  error_code: MessageErrorCode | null;
  created_at: string;
  updated_at: string;
  sent_at: string | null;
  delivered_at: string | null;
  failed_at: string | null;
  /** The channel account that carries it; null for the deployment's provider. */
  channel_account_id: ColumnType<number | null, number | null | undefined, number | null>;
  /** The conversation it belongs to (a single send or a reply to its contact, or the message they answered). */
  conversation_id: ColumnType<number | null, number | null | undefined, number | null>;
  /** The user who sent it (single sends, replies); null for campaigns. */
  sent_by: ColumnType<number | null, number | null | undefined, number | null>;
  /** The survey response whose question (or IVR call) it is (migration 036). */
  survey_response_id: ColumnType<number | null, number | null | undefined, number | null>;
  /** When a worker began its provider call (a cancel leaves it to go: `in_flight`); migration 040. */
  handing_at: ColumnType<string | null, string | null | undefined, string | null>;
}
export type MessageRow = Selectable<MessageTable>;

export interface IdempotencyKeyTable {
  id: Generated<number>;
  workspace_id: number;
  key: string;
  request_hash: string;
  status: 'in_flight' | 'done';
  response_status: number | null;
  response_body: string | null;
  created_at: string;
  updated_at: string;
}

export interface AuditLogTable {
  id: Generated<number>;
  workspace_id: number;
  /** One of `auditActions` (src/modules/audit/audit.repository.ts). */
  action: string;
  actor_id: number | null;
  actor_name: string | null;
  target_type: string | null;
  target_id: string | null;
  ip: string | null;
  /** JSON text or null. */
  details: string | null;
  created_at: string;
}
export type AuditLogRow = Selectable<AuditLogTable>;
