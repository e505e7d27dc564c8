import type { SurveyResponseRow, SurveyRow, SurveyRunRow } from '../../db/schema.ts';
import type { Question, SurveyChannel, Texts, Trigger } from './surveys.rules.ts';
import { accountRef, responseRef, runRef, surveyRef } from '../../refs.ts';

/** How surveys, runs and responses look on the wire. */

export function surveyView(row: SurveyRow) {
  return {
    id: surveyRef(row.id),
    name: row.name,
    status: row.status,
    intro: JSON.parse(row.intro) as Texts,
    outro: JSON.parse(row.outro) as Texts,
    questions: JSON.parse(row.questions) as Question[],
    retries: row.retries,
    triggers: JSON.parse(row.triggers) as Trigger[],
    has_run: row.has_run === 1,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export interface RunCounts {
  started: number;
  completed: number;
  partial: number;
  no_answer: number;
  opted_out: number;
  open: number;
  failed: number;
}

export function runView(row: SurveyRunRow, counts: RunCounts) {
  return {
    id: runRef(row.id),
    survey_id: surveyRef(row.survey_id),
    channel: row.channel as SurveyChannel, // a run goes out on one of these (createRun checks it)
    channel_account_id: row.channel_account_id !== null ? accountRef(row.channel_account_id) : null,
    status: row.status,
    recipients: row.recipients_total,
    started: counts.started,
    open: counts.open,
    completed: counts.completed,
    partial: counts.partial,
    no_answer: counts.no_answer,
    opted_out: counts.opted_out + row.opted_out,
    failed: counts.failed,
    last_error:
      row.last_error_code !== null && row.last_error_at !== null
        ? {
            error_code: row.last_error_code,
            error_message: row.last_error_message ?? '',
            at: row.last_error_at,
          }
        : null,
    scheduled_at: row.scheduled_at,
    created_at: row.created_at,
    started_at: row.started_at,
    completed_at: row.completed_at,
  };
}

export function responseView(row: SurveyResponseRow, answers: Record<string, string | number | null>) {
  return {
    id: responseRef(row.id),
    survey_id: surveyRef(row.survey_id),
    run_id: row.run_id !== null ? runRef(row.run_id) : null,
    voter_id: row.voter_id,
    address: row.address,
    channel: row.channel as SurveyChannel | 'visit', // a session runs on one of these, or came with a visit
    language: row.language,
    status: row.status,
    opted_out: row.opted_out === 1,
    answers,
    started_at: row.started_at,
    completed_at: row.completed_at,
  };
}
