/** Personal data's tables (migration 044): the privacy notice, data-principal requests, their codes, breaches. */
import type { Generated, Selectable } from 'kysely';

export interface PrivacyNoticeTable {
  workspace_id: number;
  version: number;
  /** JSON: { "<lang>": text }. */
  texts: string;
  contact: string;
  updated_at: string;
}
export type PrivacyNoticeRow = Selectable<PrivacyNoticeTable>;

export interface PrivacyRequestTable {
  id: Generated<number>;
  workspace_id: number;
  type: string;
  voter_id: number | null;
  /** E.164 or a lower-cased email; `#<hash>` once the person is erased. */
  address: string;
  status: string;
  received_via: string;
  due_at: string;
  completed_at: string | null;
  note: string | null;
  /** JSON: what the erasure removed and what remains. */
  erasure: string | null;
  due_soon_sent_at: string | null;
  created_at: string;
  updated_at: string;
}
export type PrivacyRequestRow = Selectable<PrivacyRequestTable>;

/** The public form's one-time codes: HMACs of the address and of the code, never either in clear. */
export interface PrivacyCodeTable {
  id: Generated<number>;
  workspace_id: number;
  address_hash: string;
  code_hash: string;
  attempts: Generated<number>;
  expires_at: string;
  used_at: string | null;
  created_at: string;
}

export interface BreachTable {
  id: Generated<number>;
  workspace_id: number;
  detected_at: string;
  description: string;
  affected_count: number | null;
  board_notified_at: string | null;
  people_notified_at: string | null;
  created_at: string;
  updated_at: string;
}
export type BreachRow = Selectable<BreachTable>;
