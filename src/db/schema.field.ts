/** Field work's tables (migration 043): turfs and who works them, visits, poll-day marks, voters' change stamps. */
import type { Generated, Selectable } from 'kysely';

/** A turf: a name and voter filters (JSON, as segments keep them). */
export interface TurfTable {
  id: Generated<number>;
  workspace_id: number;
  name: string;
  filters: string;
  /** The survey canvassers ask at the door, or null. */
  survey_id: number | null;
  created_at: string;
  updated_at: string;
}
export type TurfRow = Selectable<TurfTable>;

/** Who a turf is assigned to. */
export interface TurfMemberTable {
  turf_id: number;
  user_id: number;
  workspace_id: number;
}

/** A door knocked: what the canvasser found and what they changed (`not_applied`: the fields that were newer). */
export interface VisitTable {
  id: Generated<number>;
  workspace_id: number;
  client_id: string;
  voter_id: number;
  user_id: number | null;
  outcome: string;
  support_level: number | null;
  /** JSON array of tag labels, or null. */
  tags_add: string | null;
  /** JSON `{ key: value }` of custom fields, or null. */
  fields: string | null;
  note: string | null;
  survey_id: number | null;
  response_id: number | null;
  visited_at: string;
  lat: number | null;
  lon: number | null;
  /** JSON array of the fields a newer change on the service kept. */
  not_applied: Generated<string>;
  created_at: string;
}
export type VisitRow = Selectable<VisitTable>;

/** A poll-day mark as a booth agent sent it. */
export interface PollMarkTable {
  id: Generated<number>;
  workspace_id: number;
  client_id: string;
  voter_id: number;
  user_id: number | null;
  voted: number;
  marked_at: string;
  created_at: string;
}
export type PollMarkRow = Selectable<PollMarkTable>;

/** Each marked voter's state: the mark with the latest marked_at. */
export interface PollVotedTable {
  voter_id: number;
  workspace_id: number;
  voted: number;
  marked_at: string;
  /** The voter's, kept in step by a trigger (what turnout groups by). */
  booth_key: string | null;
  part_number: number | null;
  /** 1 for a voter of support level 1 or 2. */
  supporter: Generated<number>;
}

/** When a voter's field (`support_level`, `fields.<key>`) last changed on the service (kept by triggers). */
export interface VoterStampTable {
  voter_id: number;
  field: string;
  at: string;
}
