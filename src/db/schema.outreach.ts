/** Tables of consent (opt-outs, silence periods, templates), channel accounts and conversations. */
import type { ColumnType, Generated, Selectable } from 'kysely';
import type {
  AccountProvider,
  MessageChannel,
  OptOutChannel,
  OptOutSource,
  TemplateCategory,
} from '../domain.ts';

export interface OptOutTable {
  id: Generated<number>;
  workspace_id: number;
  /** E.164 phone or lower-cased email. */
  address: string;
  channel: OptOutChannel;
  source: OptOutSource;
  reason: string | null;
  created_at: string;
}
export type OptOutRow = Selectable<OptOutTable>;

export interface SilencePeriodTable {
  id: Generated<number>;
  workspace_id: number;
  constituency: string;
  constituency_key: string;
  starts_at: string;
  ends_at: string;
  reason: string | null;
  created_at: string;
}
export type SilencePeriodRow = Selectable<SilencePeriodTable>;

export interface InboundMessageTable {
  id: Generated<number>;
  workspace_id: number;
  channel: MessageChannel;
  from: string;
  body: string;
  keyword: 'stop' | 'start' | null;
  provider: string;
  /** The provider's id of the message: a replayed callback is stored once. */
  provider_message_id: ColumnType<string | null, string | null | undefined, string | null>;
  conversation_id: ColumnType<number | null, number | null | undefined, number | null>;
  created_at: string;
  /** 1: a survey answer that saves to support_level or a sensitive field (migration 041). */
  withheld: Generated<number>;
}
export type InboundMessageRow = Selectable<InboundMessageTable>;

export interface TemplateTable {
  id: Generated<number>;
  workspace_id: number;
  name: string;
  channel: MessageChannel;
  body: string;
  language: string;
  category: TemplateCategory;
  dlt_template_id: string | null;
  sender_id: string | null;
  subject: string | null;
  /** JSON text `{ <provider>: id }`: the template's id with each provider that keeps its own; null when none. */
  provider_template_ids: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: string;
  updated_at: string;
}
export type TemplateRow = Selectable<TemplateTable>;

/** One exchange with a channel account's provider, redacted (the channel log). */
export interface ChannelLogTable {
  id: Generated<number>;
  workspace_id: number;
  channel_account_id: number;
  at: string;
  direction: 'out' | 'in';
  kind: 'send' | 'status' | 'inbound' | 'test' | 'survey';
  method: string;
  url: string;
  status: number | null;
  duration_ms: number | null;
  request: string;
  response: string;
  message_id: number | null;
  error_code: string | null;
}
export type ChannelLogRow = Selectable<ChannelLogTable>;

export interface ChannelAccountTable {
  id: Generated<number>;
  workspace_id: number;
  name: string;
  provider: AccountProvider;
  /** JSON text: the channels the account is for. */
  channels: string;
  /** JSON text: the provider's non-secret settings. */
  settings: string;
  /** The JSON of the credentials, sealed (SecretBox, purpose `channel-accounts`); never returned. */
  credentials: string;
  /** JSON text: the names of the credential keys that are set (shown as `credentials_set`). */
  credentials_set: string;
  /** JSON text: the channels for which this is the workspace's default account. */
  default_for: string;
  send_rate_per_second: number | null;
  disabled_at: string | null;
  disabled_reason: string | null;
  /** Sealed: the secret in the account's callback URLs. */
  callback_token: string;
  /** Sealed: the webhook's verify token (providers whose adapter has `verifyToken`). */
  verify_token: string | null;
  created_at: string;
  updated_at: string;
}
export type ChannelAccountRow = Selectable<ChannelAccountTable>;

export interface ConversationTable {
  id: Generated<number>;
  workspace_id: number;
  channel: MessageChannel;
  address: string;
  voter_id: number | null;
  status: 'open' | 'closed';
  assigned_to: number | null;
  unread_count: ColumnType<number, number | undefined, number>;
  last_message_at: string;
  last_message_preview: string;
  last_inbound_at: string | null;
  /** The channel account the contact last wrote to. */
  channel_account_id: number | null;
  grievance_id: number | null;
  created_at: string;
  updated_at: string;
  /**
   * The linked voter's name, ward, booth and constituency key, for the inbox's search and filters: copied when
   * the conversation is created, kept in step by triggers on voters (null once the voter is deleted).
   */
  voter_name: ColumnType<string | null, string | null | undefined, string | null>;
  voter_ward: ColumnType<string | null, string | null | undefined, string | null>;
  voter_booth: ColumnType<string | null, string | null | undefined, string | null>;
  voter_constituency_key: ColumnType<string | null, string | null | undefined, string | null>;
}
export type ConversationRow = Selectable<ConversationTable>;

export interface QuickReplyTable {
  id: Generated<number>;
  workspace_id: number;
  title: string;
  body: string;
  language: string;
  created_at: string;
  updated_at: string;
}
export type QuickReplyRow = Selectable<QuickReplyTable>;

export interface LiveEventTable {
  id: Generated<number>;
  workspace_id: number;
  type: string;
  /** JSON text: the event's data, as webhooks carry it. */
  data: string;
  /** Conversation events: the conversation's assignee (a volunteer's stream carries only theirs). */
  assigned_to: number | null;
  created_at: string;
}
export type LiveEventRow = Selectable<LiveEventTable>;
