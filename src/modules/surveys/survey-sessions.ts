import type { SurveyResponseRow, SurveyRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import type { MessageChannel } from '../../domain.ts';
import { recordAudit } from '../audit/audit.repository.ts';
import { reserveCredits } from '../credits/credits.repository.ts';
import { insertMessage, latestOfSession } from '../messages/messages.repository.ts';
import { creditChannel, unitCost } from '../messages/messages.rules.ts';
import { conversationFor } from '../conversations/conversations.thread.ts';
import { fieldDefs, sensitiveKeys, storedValue } from '../voters/voter-fields.ts';
import { addTag, nameTags, setFieldValues } from '../voters/voter-record.repository.ts';
import { touchVoter, updateVoter, voterPlaces, votersByAddress } from '../voters/voters.repository.ts';
import { checkTags } from '../voters/voter-record.rules.ts';
import { emitEvent } from '../webhooks/webhooks.events.ts';
import {
  type AnswerValue,
  answerKey,
  firstText,
  languageFor,
  matchAnswer,
  OTHER,
  type Question,
  questionText,
  smsTemplateOf,
  splitFraming,
  type SurveyDefinition,
  textIn,
} from './surveys.rules.ts';
import { keywordSurvey, markSurveyRun, surveyOf } from './surveys.repository.ts';
import {
  advanceSession,
  answersOf,
  countTry,
  endOpenSessions,
  insertAnswer,
  insertResponse,
  openSession,
  sessionsIdle,
  startedSince,
} from './survey-responses.repository.ts';
import { responseView } from './surveys.view.ts';
import { defaultLanguage } from '../workspaces/workspaces.repository.ts';
import { findTemplate } from '../templates/templates.repository.ts';
import { parseRef, responseRef, surveyRef } from '../../refs.ts';

/**
 * A survey's sessions (responses): starting one, asking its questions, taking its answers, ending it. Every step
 * runs in the caller's transaction on a row read with FOR UPDATE (PostgreSQL; SQLite has one writer), and moves
 * the session with a conditional UPDATE on the question it was at: an answer is applied once, whichever process
 * takes it, and an inbound message that arrives twice (a provider's retry) is stored and answered once upstream.
 */

export function definitionOf(
  row: Pick<SurveyRow, 'intro' | 'outro' | 'questions' | 'retries' | 'triggers'>,
): SurveyDefinition {
  const intro = splitFraming(JSON.parse(row.intro) as Record<string, unknown>);
  const outro = splitFraming(JSON.parse(row.outro) as Record<string, unknown>);
  return {
    intro: intro.texts,
    outro: outro.texts,
    introTemplates: intro.templates,
    outroTemplates: outro.templates,
    questions: JSON.parse(row.questions) as SurveyDefinition['questions'],
    retries: row.retries,
    triggers: JSON.parse(row.triggers) as SurveyDefinition['triggers'],
  };
}

export interface NewSession {
  survey: SurveyRow;
  runId: number | null;
  channel: MessageChannel;
  address: string;
  voterId: number | null;
  voterLanguage: string | null;
  /** The workspace's `default_language`: a voter (or contact) without a language is asked in it. */
  defaultLanguage: string;
  accountId: number | null;
  now: string;
}

/**
 * Opens a session and asks its first question (sms, whatsapp) or places its call (ivr). Undefined when the contact
 * already has an open session on the channel (one at a time), or when the first question's credits are short
 * (`credits: false`, the session ends `no_answer` at once).
 */
export async function startSession(
  trx: Executor,
  s: NewSession,
  options: { reserved?: boolean } = {},
): Promise<{ response: SurveyResponseRow; cost: number } | undefined> {
  const def = definitionOf(s.survey);
  const response = await insertResponse(trx, {
    workspace_id: s.survey.workspace_id,
    survey_id: s.survey.id,
    run_id: s.runId,
    voter_id: s.voterId,
    address: s.address,
    channel: s.channel,
    channel_account_id: s.accountId,
    language: languageFor(def.questions, s.voterLanguage ?? s.defaultLanguage),
    status: 'open',
    started_at: s.now,
    updated_at: s.now,
  });
  if (!response) return undefined;
  if (s.survey.has_run === 0) await markSurveyRun(trx, s.survey.workspace_id, s.survey.id);
  const cost = await ask(trx, response, def, 0, { first: true, reserved: options.reserved });
  if (cost === false) await endSession(trx, response, s.now, { credits: false });
  return { response, cost: cost === false ? 0 : cost };
}

/**
 * Queues question `index` as a message to the contact (an IVR session's one call, whose questions the flow's
 * Gather applet fetches, is queued for the first only). Its credits are reserved now unless the run reserved
 * them (`reserved`); false when they are short.
 */
async function ask(
  trx: Executor,
  response: SurveyResponseRow,
  def: SurveyDefinition,
  index: number,
  options: { first?: boolean; again?: boolean; reserved?: boolean | undefined },
): Promise<number | false> {
  if (response.channel === 'ivr' && !options.first) return 0;
  const q = def.questions[index]!;
  const message = await questionMessage(trx, response.workspace_id, def, q, response, options);
  return queueMessage(trx, response, message.body, message.templateId, options.reserved);
}

/**
 * Queues one of a session's messages (a question, or the closing message) in its thread, reserving its credits
 * unless they are reserved already (`reserved`: the run's first question); false when they are short.
 */
async function queueMessage(
  trx: Executor,
  response: SurveyResponseRow,
  body: string,
  templateId: string | null,
  reserved = false,
): Promise<number | false> {
  const channel = response.channel as MessageChannel;
  const now = response.updated_at;
  const cost = unitCost(channel, body);
  const credit = creditChannel(channel);
  if (
    credit &&
    !reserved &&
    !(await reserveCredits(trx, response.workspace_id, credit, cost, responseRef(response.id), now))
  )
    return false;
  const conversation = await conversationFor(trx, response.workspace_id, channel, response.address);
  await insertMessage(trx, response.workspace_id, {
    campaign_id: null,
    channel,
    to: response.address,
    body,
    subject: null,
    media_url: null,
    template_id: templateId,
    channel_account_id: response.channel_account_id,
    conversation_id: conversation?.id ?? null,
    sent_by: null,
    status: 'queued',
    cost,
    claimed_by: null,
    lease_until: null,
    attempts: 0,
    next_attempt_at: now,
    created_at: now,
    updated_at: now,
    survey_response_id: response.id,
  });
  return cost;
}

/** A question's message: its text in the contact's language, or on SMS its DLT template's text where it names one. */
export async function questionMessage(
  db: Executor,
  workspaceId: number,
  def: SurveyDefinition,
  q: Question,
  response: Pick<SurveyResponseRow, 'channel' | 'language'>,
  options: { first?: boolean | undefined; again?: boolean | undefined },
): Promise<{ body: string; templateId: string | null }> {
  if (response.channel === 'ivr')
    return { body: textIn(def.intro, response.language) || firstText(q.text), templateId: null };
  // SMS: every question as its DLT template where it has one. WhatsApp: the session's first message opens the
  // conversation as the first question's approved template; later questions go as text inside the window the
  // voter's answer opened (contract, fifth part, "Survey questions").
  const ref =
    response.channel === 'sms'
      ? smsTemplateOf(q)
      : response.channel === 'whatsapp' && options.first
        ? q.templates?.whatsapp
        : undefined;
  const template = await templateText(db, workspaceId, ref);
  if (template) return template;
  return { body: questionText(def, q, response.language, options), templateId: null };
}

/** A template's text (its variables render at send time, as a campaign's do), or undefined. */
async function templateText(db: Executor, workspaceId: number, ref: string | undefined) {
  const id = ref === undefined ? undefined : parseRef('tpl', ref);
  if (id === undefined) return undefined;
  const template = await findTemplate(db, workspaceId, id);
  return template ? { body: template.body, templateId: ref! } : undefined;
}

export type AnswerOutcome = 'next' | 'again' | 'completed';

/**
 * Applies `text` as the answer to the session's current question: matched, it is stored (and saved to the voter
 * where the question says), and the next question is asked or the session completes; not matched, the question
 * is asked again up to the survey's `retries`, then `other` is stored and the survey moves on.
 */
export async function applyAnswer(
  trx: Executor,
  response: SurveyResponseRow,
  text: string,
  now: string,
  /** The session's survey, where the caller read it already. */
  known?: SurveyRow,
): Promise<AnswerOutcome> {
  const survey = known ?? (await surveyOf(trx, response));
  const def = definitionOf(survey);
  const q = def.questions[response.question];
  if (!q) return 'completed';
  let value: AnswerValue | undefined = matchAnswer(q, text);
  if (!value && response.tries < def.retries) {
    if (!(await countTry(trx, response, now))) return 'again';
    if ((await ask(trx, { ...response, updated_at: now }, def, response.question, { again: true })) === false)
      await endSession(trx, response, now, { credits: false });
    return 'again';
  }
  value ??= OTHER;
  const next = response.question + 1;
  const done = next >= def.questions.length;
  // Another process took an answer to this question first: this one changes nothing.
  if (!(await advanceSession(trx, response, done, now))) return 'next';
  // The voter's places as they are now: results by place count the answer where the voter was.
  const places =
    response.voter_id === null ? undefined : await voterPlaces(trx, response.workspace_id, response.voter_id);
  await insertAnswer(trx, {
    response_id: response.id,
    question_key: q.key,
    workspace_id: response.workspace_id,
    survey_id: response.survey_id,
    voter_id: response.voter_id,
    ...value,
    booth: places?.booth ?? null,
    ward: places?.ward ?? null,
    constituency: places?.constituency ?? null,
    part_number: places?.part_number ?? null,
    answered_at: now,
  });
  if (value !== OTHER && q.save_to && response.voter_id !== null)
    await saveToVoter(trx, response, q, value, now);
  const moved2 = { ...response, question: next, tries: 0, answered: response.answered + 1, updated_at: now };
  if (done) {
    await completed(trx, { ...moved2, status: 'completed', completed_at: now }, def, now);
    return 'completed';
  }
  if ((await ask(trx, moved2, def, next, {})) === false)
    await endSession(trx, moved2, now, { credits: false });
  return 'next';
}

/** A completed session: the outro (sms, whatsapp) and the `survey.response.completed` event. */
async function completed(trx: Executor, response: SurveyResponseRow, def: SurveyDefinition, now: string) {
  // The closing message, where the survey has one and its credits allow (IVR says goodbye in its flow).
  if (response.channel !== 'ivr' && Object.keys(def.outro).length > 0) {
    const template =
      response.channel === 'sms'
        ? await templateText(trx, response.workspace_id, def.outroTemplates.sms)
        : undefined;
    await queueMessage(
      trx,
      { ...response, updated_at: now },
      template?.body ?? textIn(def.outro, response.language),
      template?.templateId ?? null,
    );
  }
  // Webhooks never carry a sensitive value: the answers that save to support_level or a sensitive field are left
  // out of the event (the API's responses give them to politicians and managers).
  const answers = { ...(await answersOf(trx, response.workspace_id, [response.id])).get(response.id) };
  for (const key of await sensitiveQuestions(trx, response.workspace_id, def.questions)) delete answers[key];
  await emitEvent(
    trx,
    response.workspace_id,
    'survey.response.completed',
    responseView(response, answers),
    now,
  );
}

/**
 * Ends an open session short of its end: `partial` when something was answered, else `no_answer`; `optedOut`
 * marks a STOP; `credits: false` one whose next question could not be paid for.
 */
export async function endSession(
  trx: Executor,
  response: SurveyResponseRow,
  now: string,
  how: { optedOut?: boolean; credits?: boolean } = {},
): Promise<void> {
  await endOpenSessions(trx, [response.id], now, { optedOut: how.optedOut === true });
}

/** Writes an answer into the voter (`save_to`), audited with the actor `survey` and the survey's id. */
export async function saveToVoter(
  trx: Executor,
  response: SurveyResponseRow,
  q: Question,
  value: AnswerValue,
  now: string,
) {
  const ws = response.workspace_id;
  const voterId = response.voter_id!;
  const target = q.save_to!;
  let saved: Record<string, unknown> | undefined;
  if (target === 'support_level') {
    const level = value.choice_key !== null ? Number(value.choice_key) : value.number_value;
    if (level !== null && Number.isInteger(level) && level >= 1 && level <= 5) {
      await updateVoter(trx, ws, voterId, { support_level: level, updated_at: now });
      saved = { support_level: level };
    }
  } else if (target === 'tags' && value.choice_key !== null) {
    const { tags } = checkTags([value.choice_key]);
    if (tags && tags.length > 0 && (await touchVoter(trx, ws, voterId, now))) {
      await nameTags(trx, ws, tags);
      await addTag(trx, ws, voterId, tags[0]!.key);
      saved = { tags_add: [tags[0]!.label] };
    }
  } else if (target.startsWith('field:')) {
    const key = target.slice(6);
    const def = (await fieldDefs(trx, ws)).find((d) => d.key === key);
    if (def) {
      const choice = q.choices?.find((c) => c.key === value.choice_key);
      const candidates: unknown[] =
        value.choice_key !== null
          ? def.type === 'boolean'
            ? [value.choice_key, firstText(choice?.label ?? {})]
            : [value.choice_key, ...Object.values(choice?.label ?? {})]
          : [value.number_value ?? value.text_value];
      for (const raw of candidates) {
        const stored = storedValue(def, raw, true);
        if (stored === null || typeof stored === 'string') continue;
        if (await touchVoter(trx, ws, voterId, now)) {
          await setFieldValues(trx, ws, voterId, new Map([[key, stored]]));
          saved = { field: key };
        }
        break;
      }
    }
  }
  if (saved)
    await recordAudit(trx, {
      workspaceId: ws,
      actor: { userId: null, ip: null },
      action: 'voter.updated',
      target: { type: 'voter', id: voterId },
      details: { actor: 'survey', survey_id: surveyRef(response.survey_id), question: q.key, ...saved },
    });
}

/** The active survey whose keyword trigger is this whole text, on this channel. */
async function keywordTrigger(trx: Executor, workspaceId: number, channel: string, body: string) {
  const keyword = answerKey(body);
  if (keyword === '' || keyword.length > 40 || /\s/.test(keyword)) return undefined;
  return keywordSurvey(trx, workspaceId, channel, keyword);
}

/**
 * A keyword or a missed call starts a survey for an address at most once in this many hours. Without it,
 * anyone could text the keyword (or ring the number) again each time a session ends, and spend the office's
 * credits one question at a time.
 */
export const TRIGGER_REPEAT_HOURS = 24;

/** Whether a trigger may start `surveyId` for `address` now: no response of it started there lately. */
export async function mayTrigger(
  trx: Executor,
  survey: Pick<SurveyRow, 'id' | 'workspace_id'>,
  address: string,
  now: string,
): Promise<boolean> {
  const since = new Date(Date.parse(now) - TRIGGER_REPEAT_HOURS * 3_600_000).toISOString();
  return !(await startedSince(trx, survey.workspace_id, survey.id, address, since));
}

/** The voter an address belongs to (for a session a trigger opened): id and language. */
export async function voterByAddress(
  trx: Executor,
  workspaceId: number,
  channel: MessageChannel,
  address: string,
) {
  const column = channel === 'email' ? 'email' : 'phone';
  return (await votersByAddress(trx, workspaceId, column, [address])).get(address);
}

/**
 * An inbound message, in the inbound transaction: STOP ends the contact's open session (the opt-out itself is
 * the inbound service's); with an open session it is that session's answer; otherwise, when its whole text is
 * an active survey's keyword on the channel, it starts that survey for the contact. Returns true when a survey
 * took it (it is still stored and threaded as any reply).
 */
export async function surveyInbound(
  trx: Executor,
  workspaceId: number,
  input: {
    channel: MessageChannel;
    from: string;
    body: string;
    keyword: string | null;
    channelAccountId: number | null;
  },
  now: string,
): Promise<{ taken: boolean; withheld: boolean }> {
  const none = { taken: false, withheld: false };
  if (input.channel !== 'sms' && input.channel !== 'whatsapp') return none;
  const open = await openSession(trx, workspaceId, input.channel, input.from);
  if (input.keyword === 'stop') {
    if (open) await endSession(trx, open, now, { optedOut: true });
    return { taken: open !== undefined, withheld: false };
  }
  // An answer only to a question the provider has: while it is queued (held, or waiting on the gateway) the
  // contact's message is their own, not an answer to what they have not read.
  if (open && (await questionHandedOver(trx, open))) {
    const survey = await surveyOf(trx, open);
    const q = definitionOf(survey).questions[open.question];
    const withheld = q !== undefined && (await sensitiveQuestions(trx, workspaceId, [q])).has(q.key);
    await applyAnswer(trx, open, input.body, now, survey);
    return { taken: true, withheld };
  }
  if (open) return none;
  const survey = await keywordTrigger(trx, workspaceId, input.channel, input.body);
  // A keyword sent again within TRIGGER_REPEAT_HOURS is an ordinary message (stored and threaded).
  if (!survey || !(await mayTrigger(trx, survey, input.from, now))) return none;
  const voter = await voterByAddress(trx, workspaceId, input.channel, input.from);
  await startSession(trx, {
    survey,
    runId: null,
    channel: input.channel,
    address: input.from,
    voterId: voter?.id ?? null,
    voterLanguage: voter?.language ?? null,
    defaultLanguage: await defaultLanguage(trx, workspaceId),
    accountId: input.channelAccountId,
    now,
  });
  return { taken: true, withheld: false };
}

/**
 * The questions whose answers are sensitive values: they save to `support_level` or to a sensitive custom field
 * (contract, fifth part: volunteers never read them; webhooks, the live stream and a manager's export never carry
 * them). One read of the field definitions at most, for all the questions.
 */
export async function sensitiveQuestions(
  db: Executor,
  workspaceId: number,
  questions: ReadonlyArray<Pick<Question, 'key' | 'save_to'>>,
): Promise<Set<string>> {
  const keys = new Set(questions.filter((q) => q.save_to === 'support_level').map((q) => q.key));
  const toFields = questions.filter((q) => q.save_to?.startsWith('field:'));
  if (toFields.length === 0) return keys;
  const sensitive = sensitiveKeys(await fieldDefs(db, workspaceId));
  for (const q of toFields) if (sensitive.has(q.save_to!.slice(6))) keys.add(q.key);
  return keys;
}

/** Whether the session's latest message (its current question) was handed to the provider. */
async function questionHandedOver(trx: Executor, response: SurveyResponseRow): Promise<boolean> {
  const status = await latestOfSession(trx, response.workspace_id, response.id);
  return status === 'sent' || status === 'delivered';
}

/** Sessions idle for `hours` end as `partial` or `no_answer`, at most `limit` per call. */
export async function expireIdle(db: Executor, hours: number, now: Date, limit = 1000): Promise<number> {
  const cutoff = new Date(now.getTime() - hours * 3_600_000).toISOString();
  const at = now.toISOString();
  const ids = await sessionsIdle(db, cutoff, limit);
  return endOpenSessions(db, ids, at, { idleBefore: cutoff });
}
