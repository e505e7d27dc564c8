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
  /** PRIVACY_REQUIRE_CONSENT: a bulk message to a voter whose consent is not `given`. */
  'no_consent',
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

export const optOutSources = [
  'manual',
  'keyword',
  'unsubscribe_link',
  'provider',
  /** The public privacy page's form (a withdrawal of consent, the address proven by a code). */
  'privacy_form',
  /** An erasure: the address is kept only as a keyed hash (`#<hash>`). */
  'erasure',
] as const;
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

/** A voter's consent (the contract's fourth part, "Personal data"). */
export const consentStatuses = ['given', 'withdrawn', 'unknown'] as const;
export type ConsentStatus = (typeof consentStatuses)[number];
export const consentSources = ['import', 'form', 'keyword', 'visit', 'api'] as const;
export type ConsentSource = (typeof consentSources)[number];

/** Data-principal requests. */
export const privacyRequestTypes = ['access', 'correction', 'erasure', 'nomination', 'grievance'] as const;
export type PrivacyRequestType = (typeof privacyRequestTypes)[number];
export const privacyRequestStatuses = ['open', 'verified', 'completed', 'rejected'] as const;
export type PrivacyRequestStatus = (typeof privacyRequestStatuses)[number];
export const privacyRequestVias = ['office', 'public_form', 'keyword'] as const;
export type PrivacyRequestVia = (typeof privacyRequestVias)[number];
