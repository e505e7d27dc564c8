/**
 * The domain's vocabulary: the closed sets of values (roles, channels, statuses, error codes) that the
 * database stores, the API documents and the services branch on. It depends on nothing.
 */

export const roles = ['politician', 'manager', 'volunteer'] as const;
export type Role = (typeof roles)[number];

export const creditChannels = ['sms', 'whatsapp', 'email'] as const;
export type CreditChannel = (typeof creditChannels)[number];

export const ledgerKinds = ['grant', 'purchase', 'reserve', 'capture', 'refund'] as const;
export type LedgerKind = (typeof ledgerKinds)[number];

export const deliveryStatuses = ['pending', 'succeeded', 'failed'] as const;
export type DeliveryStatus = (typeof deliveryStatuses)[number];

export const grievanceStatuses = ['open', 'in_progress', 'resolved', 'closed'] as const;
export type GrievanceStatus = (typeof grievanceStatuses)[number];

export const grievancePriorities = ['low', 'normal', 'high', 'urgent'] as const;
export type GrievancePriority = (typeof grievancePriorities)[number];

export const messageChannels = ['whatsapp', 'sms', 'email', 'ivr'] as const;
export type MessageChannel = (typeof messageChannels)[number];

export const messageStatuses = ['queued', 'sent', 'delivered', 'failed'] as const;
export type MessageStatus = (typeof messageStatuses)[number];

/** Why a failed message failed (contract, second part, "Messages you can account for"). */
export const messageErrorCodes = [
  'cancelled',
  'invalid_recipient',
  'provider_rejected',
  'undeliverable',
  'opted_out',
  'silence_period',
  'dnd',
  'dlt_rejected',
  'outside_session',
  'rate_limited',
  'auth_failed',
] as const;
export type MessageErrorCode = (typeof messageErrorCodes)[number];

export const campaignStatuses = [
  'draft',
  'scheduled',
  'queued',
  'sending',
  'completed',
  'cancelled',
] as const;
export type CampaignStatus = (typeof campaignStatuses)[number];

export const voterImportStatuses = ['queued', 'running', 'completed', 'failed'] as const;
export type VoterImportStatus = (typeof voterImportStatuses)[number];

export const optOutChannels = ['whatsapp', 'sms', 'email', 'ivr', 'all'] as const;
export type OptOutChannel = (typeof optOutChannels)[number];

export const optOutSources = ['manual', 'keyword', 'unsubscribe_link', 'provider'] as const;
export type OptOutSource = (typeof optOutSources)[number];

export const templateCategories = ['promotional', 'service', 'transactional'] as const;
export type TemplateCategory = (typeof templateCategories)[number];

/** A channel account's provider: the name of one of src/providers/registry.ts's adapters. */
export type AccountProvider = string;

/** One page of a list, as every list route answers it. */
export interface PageResult<T> {
  data: T[];
  current_page: number;
  per_page: number;
  total: number;
  last_page: number;
}

export function pageResult<T>(items: T[], total: number, page: number, perPage: number): PageResult<T> {
  return {
    data: items,
    current_page: page,
    per_page: perPage,
    total,
    last_page: Math.max(1, Math.ceil(total / perPage)),
  };
}
