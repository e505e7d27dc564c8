import type { SurveyRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import type { FieldErrors } from '../../errors.ts';
import { parseRef, surveyRef } from '../../refs.ts';
import { voterPlaces } from '../voters/voters.repository.ts';
import { emitEvent } from '../webhooks/webhooks.events.ts';
import { insertAnswer, insertResponse } from './survey-responses.repository.ts';
import { definitionOf, saveToVoter, sensitiveQuestions } from './survey-sessions.ts';
import { type AnswerValue, matchAnswer, type Question, shownAnswer } from './surveys.rules.ts';
import { findSurvey } from './surveys.repository.ts';
import { responseView } from './surveys.view.ts';

/**
 * A survey asked at the door (the contract's fourth part, "Field work"): a visit's answers are a survey response
 * with `channel: "visit"`, completed when every question is answered (else `partial`), saved to the voter where a
 * question says so, as a session's answers are.
 */

/** A visit's answers, read against its survey: each question's value, or the errors to give. */
export interface VisitAnswers {
  survey: SurveyRow;
  values: Array<{ question: Question; value: AnswerValue }>;
  /** What each answer saves to (`support_level`, `tags`, `field:<key>`), by question key. */
  targets: Map<string, string>;
}

/**
 * Reads `answers` (`{ question_key: value }`, a choice's key or label, a number or text) against the survey.
 * `mayWriteSensitive` false (a volunteer): an answer to a question that saves to support_level or a sensitive field
 * is refused, since the device that queued it would hold it.
 */
export async function checkVisitAnswers(
  db: Executor,
  workspaceId: number,
  surveyId: string,
  answers: Record<string, unknown>,
  mayWriteSensitive: boolean,
  /** Kept across a batch's visits: each survey (and its sensitive questions) read once. */
  cache: Map<string, Promise<unknown>> = new Map(),
): Promise<VisitAnswers | FieldErrors> {
  const id = parseRef('svy', surveyId);
  const once = <T>(key: string, read: () => Promise<T>): Promise<T> => {
    if (!cache.has(key)) cache.set(key, read());
    return cache.get(key) as Promise<T>;
  };
  const survey =
    id === undefined ? undefined : await once(`survey:${id}`, () => findSurvey(db, workspaceId, id));
  if (!survey) return { survey_id: ['is not a survey of this workspace (svy_<n>).'] };
  const def = definitionOf(survey);
  const errors: FieldErrors = {};
  const values: VisitAnswers['values'] = [];
  const targets = new Map<string, string>();
  const sensitive = mayWriteSensitive
    ? new Set<string>()
    : await once(`sensitive:${id}`, () => sensitiveQuestions(db, workspaceId, def.questions));
  for (const [key, raw] of Object.entries(answers)) {
    const question = def.questions.find((q) => q.key === key);
    if (!question) {
      errors[`answers.${key}`] = [`is not a question of ${surveyRef(survey.id)}.`];
      continue;
    }
    if (sensitive.has(key)) {
      errors[`answers.${key}`] = ['saves a sensitive value: politicians and managers record it.'];
      continue;
    }
    const value =
      typeof raw === 'string' || typeof raw === 'number' || typeof raw === 'boolean'
        ? matchAnswer(question, String(raw))
        : undefined;
    if (!value) {
      errors[`answers.${key}`] = [
        question.type === 'choice'
          ? `must be one of the choices: ${(question.choices ?? []).map((c) => c.key).join(', ')}.`
          : question.type === 'number'
            ? 'must be a number the question allows.'
            : 'must be some text.',
      ];
      continue;
    }
    values.push({ question, value });
    if (question.save_to) targets.set(key, question.save_to);
  }
  return Object.keys(errors).length > 0 ? errors : { survey, values, targets };
}

/**
 * Stores the answers as a `visit` response of the voter, saving each to the voter unless its target is in
 * `keep` (a newer value on the service). Returns the response's id.
 */
export async function storeVisitResponse(
  trx: Executor,
  checked: VisitAnswers,
  voter: { id: number; workspaceId: number; phone: string | null; language: string },
  at: string,
  keep: ReadonlySet<string>,
): Promise<number> {
  const { survey, values } = checked;
  const def = definitionOf(survey);
  const complete = values.length >= def.questions.length;
  const response = (await insertResponse(trx, {
    workspace_id: voter.workspaceId,
    survey_id: survey.id,
    run_id: null,
    voter_id: voter.id,
    address: voter.phone ?? '',
    channel: 'visit',
    channel_account_id: null,
    language: voter.language,
    status: complete ? 'completed' : 'partial',
    question: values.length,
    answered: values.length,
    started_at: at,
    updated_at: at,
    completed_at: at,
  }))!;
  const places = await voterPlaces(trx, voter.workspaceId, voter.id);
  const shown: Record<string, string | number | null> = {};
  for (const { question, value } of values) {
    await insertAnswer(trx, {
      response_id: response.id,
      question_key: question.key,
      workspace_id: voter.workspaceId,
      survey_id: survey.id,
      voter_id: voter.id,
      ...value,
      booth: places?.booth ?? null,
      ward: places?.ward ?? null,
      constituency: places?.constituency ?? null,
      part_number: places?.part_number ?? null,
      answered_at: at,
    });
    shown[question.key] = shownAnswer(value);
    if (question.save_to && value.choice_key !== 'other' && !keep.has(question.save_to))
      await saveToVoter(trx, response, question, value, at);
  }
  if (complete) {
    // Webhooks never carry a sensitive value (as a session's completion).
    for (const key of await sensitiveQuestions(trx, voter.workspaceId, def.questions)) delete shown[key];
    await emitEvent(trx, voter.workspaceId, 'survey.response.completed', responseView(response, shown), at);
  }
  return response.id;
}

/** A turf's door survey as canvassers see it: its questions, less those that save a sensitive value (volunteers). */
export async function doorSurvey(
  db: Executor,
  workspaceId: number,
  surveyId: number,
  mayReadSensitive: boolean,
) {
  const survey = await findSurvey(db, workspaceId, surveyId);
  if (!survey) return null;
  const { questions } = definitionOf(survey);
  const hidden = mayReadSensitive ? new Set<string>() : await sensitiveQuestions(db, workspaceId, questions);
  return {
    id: surveyRef(survey.id),
    name: survey.name,
    questions: questions.filter((q) => !hidden.has(q.key)),
  };
}

/** The id of a survey of the workspace named by `ref` (`svy_<n>`), or undefined. */
export async function surveyIdOf(
  db: Executor,
  workspaceId: number,
  ref: string,
): Promise<number | undefined> {
  const id = parseRef('svy', ref);
  return id !== undefined && (await findSurvey(db, workspaceId, id)) ? id : undefined;
}
