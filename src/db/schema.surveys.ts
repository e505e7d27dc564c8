/** The surveys' tables (migration 036): surveys, keyword triggers, runs, responses and answers. */
import type { ColumnType, Generated, Selectable } from 'kysely';

/** A survey (migration 036): its texts, questions and triggers are JSON. */
export interface SurveyTable {
  id: Generated<number>;
  workspace_id: number;
  name: string;
  status: 'draft' | 'active' | 'closed';
  intro: string;
  outro: string;
  questions: string;
  retries: number;
  triggers: string;
  has_run: Generated<number>;
  created_by: number | null;
  created_at: string;
  updated_at: string;
}
export type SurveyRow = Selectable<SurveyTable>;

/** A keyword trigger of an active survey. */
export interface SurveyKeywordTable {
  workspace_id: number;
  channel: string;
  keyword: string;
  survey_id: number;
}

/** A survey's send to an audience. */
export interface SurveyRunTable {
  id: Generated<number>;
  workspace_id: number;
  survey_id: number;
  channel: string;
  channel_account_id: number | null;
  status: 'scheduled' | 'running' | 'completed' | 'cancelled' | 'failed';
  segment_id: number | null;
  filters: string | null;
  recipients: string | null;
  recipients_total: Generated<number>;
  unit_cost: Generated<number>;
  reserved_credits: Generated<number>;
  /** Contacts the fill skipped because they had opted out of the channel. */
  opted_out: Generated<number>;
  voter_id_limit: number | null;
  filled: Generated<number>;
  after_id: Generated<number>;
  lease_until: string | null;
  scheduled_at: string | null;
  created_by: number | null;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  /** The latest refusal of its questions by the provider (migration 040). */
  last_error_code: ColumnType<string | null, string | null | undefined, string | null>;
  last_error_message: ColumnType<string | null, string | null | undefined, string | null>;
  last_error_at: ColumnType<string | null, string | null | undefined, string | null>;
}
export type SurveyRunRow = Selectable<SurveyRunTable>;

/** One contact's session of a survey (a response). */
export interface SurveyResponseTable {
  id: Generated<number>;
  workspace_id: number;
  survey_id: number;
  run_id: number | null;
  voter_id: number | null;
  address: string;
  channel: string;
  channel_account_id: number | null;
  language: string;
  status: 'open' | 'completed' | 'partial' | 'no_answer' | 'failed';
  question: Generated<number>;
  tries: Generated<number>;
  answered: Generated<number>;
  opted_out: Generated<number>;
  started_at: string;
  updated_at: string;
  completed_at: string | null;
  /** IVR: the question the call's Gather asked, whose keys the Passthru brings (once); migration 040. */
  ivr_question: ColumnType<number | null, number | null | undefined, number | null>;
}
export type SurveyResponseRow = Selectable<SurveyResponseTable>;

/** One answer of a response. */
export interface SurveyAnswerTable {
  response_id: number;
  question_key: string;
  workspace_id: number;
  survey_id: number;
  voter_id: number | null;
  choice_key: string | null;
  number_value: number | null;
  text_value: string | null;
  booth: string | null;
  ward: string | null;
  constituency: string | null;
  part_number: number | null;
  answered_at: string;
}
