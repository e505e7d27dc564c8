import type { FieldErrors } from '../../errors.ts';
import { placeKey, placeText } from '../../lib/place.ts';
import type { VoterFieldDef } from '../voters/voter-fields.ts';
import { checkTags } from '../voters/voter-record.rules.ts';

/**
 * What a survey is (the contract's fourth part, "Surveys: ask voters on every channel") and the rules that need
 * no database: its checks, the text a voter gets in their language, and how an answer is matched.
 */

export const surveyChannels = ['sms', 'whatsapp', 'ivr'] as const;
export type SurveyChannel = (typeof surveyChannels)[number];
export const questionTypes = ['choice', 'number', 'text'] as const;
export type QuestionType = (typeof questionTypes)[number];

export const QUESTIONS_MAX = 30;
export const CHOICES_MAX = 20;
export const TEXT_MAX = 1000;
export const ANSWER_TEXT_MAX = 1000;
export const RETRIES_MAX = 5;
export const TRIGGERS_MAX = 20;

/** Texts by language (`en`, `hi`, ...): the first is the survey's default. */
export type Texts = Record<string, string>;

export interface Choice {
  key: string;
  label: Texts;
  keywords?: string[];
}

export interface Question {
  key: string;
  text: Texts;
  type: QuestionType;
  choices?: Choice[];
  min?: number;
  max?: number;
  save_to?: string;
  /** The templates it goes as, by channel (contract, fifth part, "Survey questions"). */
  templates?: Templates;
  /** Earlier clients' name for `templates.sms`. */
  template_id?: string;
  /** A recording the call plays instead of speaking the text (IVR). */
  audio_url?: string;
}

export type Trigger =
  | { channel: 'sms' | 'whatsapp'; keyword: string }
  | { missed_call: true; channel_account_id: string; reply_channel: SurveyChannel };

/**
 * The templates a text goes as, by channel: `sms` a DLT-registered one (every SMS of a templates-only channel
 * is one), `whatsapp` an approved one (the first message of a session opens the conversation with it).
 */
export interface Templates {
  sms?: string;
  whatsapp?: string;
}

export interface SurveyDefinition {
  intro: Texts;
  outro: Texts;
  /** The intro's and the outro's templates (stored as `templates` beside their texts). */
  introTemplates: Templates;
  outroTemplates: Templates;
  questions: Question[];
  retries: number;
  triggers: Trigger[];
}

const KEY = /^[a-z][a-z0-9_]{0,39}$/;
const LANG = /^[a-z]{2}$/;

function checkTexts(raw: unknown, field: string, errors: FieldErrors, required: boolean): Texts {
  if (raw === undefined || raw === null) {
    if (required) errors[field] = ['is required: texts by language, e.g. { "en": "...", "hi": "..." }.'];
    return {};
  }
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    errors[field] = ['must be an object of texts by language, e.g. { "en": "...", "hi": "..." }.'];
    return {};
  }
  const texts: Texts = {};
  for (const [lang, value] of Object.entries(raw as Record<string, unknown>)) {
    if (!LANG.test(lang)) {
      errors[field] = [`"${lang.slice(0, 20)}" is not a two-letter language code (en, hi, ...).`];
      continue;
    }
    if (typeof value !== 'string' || value.trim() === '') {
      errors[`${field}.${lang}`] = ['must be a non-empty text.'];
      continue;
    }
    if ([...value].length > TEXT_MAX) {
      errors[`${field}.${lang}`] = [`must be at most ${TEXT_MAX} characters.`];
      continue;
    }
    texts[lang] = value.trim();
  }
  if (required && Object.keys(texts).length === 0 && !errors[field])
    errors[field] = ['must hold a text in at least one language.'];
  return texts;
}

/** A choice's key, label or keyword as answers are compared: the place-name form, case-folded. */
export const answerKey = (text: string) => placeKey(text).replace(/[.!?।]+$/u, '');

const DEVANAGARI_DIGITS = /[०-९]/g;
/** Devanagari digits (०-९) as ASCII digits. */
export const asciiDigits = (text: string) =>
  text.replace(DEVANAGARI_DIGITS, (d) => String(d.charCodeAt(0) - 0x0966));

function checkChoices(raw: unknown, field: string, errors: FieldErrors): Choice[] {
  if (!Array.isArray(raw) || raw.length < 2 || raw.length > CHOICES_MAX) {
    errors[field] = [`a choice question needs 2 to ${CHOICES_MAX} choices.`];
    return [];
  }
  const choices: Choice[] = [];
  const seen = new Set<string>();
  raw.forEach((item: unknown, i) => {
    const at = `${field}.${i}`;
    const c = (item ?? {}) as Record<string, unknown>;
    const key = typeof c.key === 'string' ? c.key.trim() : typeof c.key === 'number' ? String(c.key) : '';
    if (!/^[A-Za-z0-9_]{1,20}$/.test(key)) {
      errors[`${at}.key`] = [
        'must be 1 to 20 letters, digits or _ (what a voter types or presses: 1, 2, ...).',
      ];
      return;
    }
    const label = checkTexts(c.label, `${at}.label`, errors, true);
    const keywords: string[] = [];
    if (c.keywords !== undefined) {
      if (
        !Array.isArray(c.keywords) ||
        c.keywords.length > 20 ||
        c.keywords.some((k) => typeof k !== 'string')
      )
        errors[`${at}.keywords`] = ['must be a list of at most 20 texts.'];
      else
        for (const k of c.keywords as string[])
          if (placeText(k) !== '') keywords.push(placeText(k).slice(0, 100));
    }
    // Every way to pick this choice must pick only this one.
    for (const word of [key, ...Object.values(label), ...keywords].map((w) => answerKey(asciiDigits(w)))) {
      if (seen.has(`${word}#${i}`)) continue;
      if ([...seen].some((s) => s.startsWith(`${word}#`))) {
        errors[at] = [
          `"${word.slice(0, 40)}" would match two choices: keys, labels and keywords must differ.`,
        ];
        return;
      }
      seen.add(`${word}#${i}`);
    }
    choices.push({ key, label, ...(keywords.length > 0 ? { keywords } : {}) });
  });
  return choices;
}

/** Where a question's answer may be saved, given the workspace's custom fields. */
function checkSaveTo(q: Question, defs: readonly VoterFieldDef[], field: string, errors: FieldErrors): void {
  const target = q.save_to;
  if (target === undefined) return;
  if (target === 'support_level') {
    const ok =
      q.type === 'number'
        ? (q.min ?? 1) >= 1 && (q.max ?? 5) <= 5 && q.min !== undefined && q.max !== undefined
        : q.type === 'choice' && (q.choices ?? []).every((c) => /^[1-5]$/.test(c.key));
    if (!ok)
      errors[field] = [
        'support_level takes 1 to 5: a choice question whose keys are 1 to 5, or a number question with min 1 and max 5.',
      ];
    return;
  }
  if (target === 'tags') {
    if (q.type !== 'choice')
      errors[field] = ['tags takes the key of a choice: only a choice question can save to it.'];
    else if (checkTags((q.choices ?? []).map((c) => c.key)).errors.tags)
      errors[field] = ['every choice key must be a valid tag.'];
    return;
  }
  if (!target.startsWith('field:')) {
    errors[field] = ['must be "support_level", "tags" or "field:<key>" naming a custom voter field.'];
    return;
  }
  const def = defs.find((d) => d.key === target.slice(6));
  if (!def) {
    errors[field] = [`the custom field "${target.slice(6, 46)}" does not exist (GET /api/voter-fields).`];
    return;
  }
  const fits =
    def.type === 'text' ||
    (def.type === 'number' && q.type === 'number') ||
    (def.type === 'choice' &&
      q.type === 'choice' &&
      (q.choices ?? []).every((c) =>
        def.choices!.some(
          (d) =>
            d.toLowerCase() === c.key.toLowerCase() || d.toLowerCase() === firstText(c.label).toLowerCase(),
        ),
      )) ||
    (def.type === 'boolean' &&
      q.type === 'choice' &&
      (q.choices ?? []).every(
        (c) =>
          ['true', 'false', 'yes', 'no'].includes(firstText(c.label).toLowerCase()) ||
          ['true', 'false', 'yes', 'no'].includes(c.key.toLowerCase()),
      ));
  if (!fits)
    errors[field] = [
      `a ${q.type} question cannot be saved to the ${def.type} field "${def.key}"${def.type === 'choice' ? ": each choice key (or English label) must be one of the field's choices" : ''}.`,
    ];
}

export const firstText = (texts: Texts) => Object.values(texts)[0] ?? '';

function checkQuestions(raw: unknown, defs: readonly VoterFieldDef[], errors: FieldErrors): Question[] {
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > QUESTIONS_MAX) {
    errors.questions = [`must hold 1 to ${QUESTIONS_MAX} questions.`];
    return [];
  }
  const questions: Question[] = [];
  const keys = new Set<string>();
  raw.forEach((item: unknown, i) => {
    const at = `questions.${i}`;
    const q = (item ?? {}) as Record<string, unknown>;
    const key = typeof q.key === 'string' ? q.key : '';
    if (!KEY.test(key))
      errors[`${at}.key`] = ['must be 1 to 40 lower-case letters, digits or _, starting with a letter.'];
    else if (keys.has(key)) errors[`${at}.key`] = [`"${key}" is used by another question.`];
    keys.add(key);
    const type = q.type as QuestionType;
    if (!questionTypes.includes(type)) {
      errors[`${at}.type`] = [`must be one of ${questionTypes.join(', ')}.`];
      return;
    }
    const question: Question = { key, text: checkTexts(q.text, `${at}.text`, errors, true), type };
    if (type === 'choice') question.choices = checkChoices(q.choices, `${at}.choices`, errors);
    else if (q.choices !== undefined) errors[`${at}.choices`] = ['only a choice question has choices.'];
    for (const bound of ['min', 'max'] as const) {
      const v = q[bound];
      if (v === undefined || v === null) continue;
      if (type !== 'number') errors[`${at}.${bound}`] = ['only a number question has min and max.'];
      else if (typeof v !== 'number' || !Number.isFinite(v) || Math.abs(v) > 1e9)
        errors[`${at}.${bound}`] = ['must be a number.'];
      else question[bound] = v;
    }
    if (question.min !== undefined && question.max !== undefined && question.min > question.max)
      errors[`${at}.max`] = ['must not be less than min.'];
    if (q.save_to !== undefined && q.save_to !== null) {
      if (typeof q.save_to !== 'string') errors[`${at}.save_to`] = ['must be a string.'];
      else question.save_to = q.save_to;
    }
    if (q.template_id !== undefined && q.template_id !== null) {
      if (typeof q.template_id !== 'string' || !TEMPLATE_REF.test(q.template_id))
        errors[`${at}.template_id`] = ['must be a template id such as tpl_3.'];
      else question.template_id = q.template_id;
    }
    const templates = checkTemplates(q.templates, `${at}.templates`, errors);
    if (Object.keys(templates).length > 0) question.templates = templates;
    if (q.audio_url !== undefined && q.audio_url !== null) {
      if (typeof q.audio_url !== 'string' || !/^https?:\/\/\S{1,1990}$/.test(q.audio_url))
        errors[`${at}.audio_url`] = ['must be an http(s) URL of a recording.'];
      else question.audio_url = q.audio_url;
    }
    checkSaveTo(question, defs, `${at}.save_to`, errors);
    questions.push(question);
  });
  return questions;
}

function checkTriggers(raw: unknown, errors: FieldErrors): Trigger[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw) || raw.length > TRIGGERS_MAX) {
    errors.triggers = [`must be a list of at most ${TRIGGERS_MAX} triggers.`];
    return [];
  }
  const triggers: Trigger[] = [];
  const seen = new Set<string>();
  raw.forEach((item: unknown, i) => {
    const at = `triggers.${i}`;
    const t = (item ?? {}) as Record<string, unknown>;
    if (t.missed_call === true) {
      const account = typeof t.channel_account_id === 'string' ? t.channel_account_id : '';
      if (!/^cha_\d{1,15}$/.test(account))
        errors[`${at}.channel_account_id`] = [
          'must be the channel account (cha_<n>) whose number takes the missed calls.',
        ];
      const reply = t.reply_channel as SurveyChannel;
      if (!surveyChannels.includes(reply))
        errors[`${at}.reply_channel`] = [`must be one of ${surveyChannels.join(', ')}.`];
      if (seen.has(`missed:${account}`)) errors[at] = ['this account already has a missed-call trigger.'];
      seen.add(`missed:${account}`);
      triggers.push({ missed_call: true, channel_account_id: account, reply_channel: reply });
      return;
    }
    const channel = t.channel as 'sms' | 'whatsapp';
    if (channel !== 'sms' && channel !== 'whatsapp') {
      errors[`${at}.channel`] = [
        'a keyword trigger is on sms or whatsapp (a missed call starts an IVR survey).',
      ];
      return;
    }
    const keyword = typeof t.keyword === 'string' ? answerKey(t.keyword) : '';
    if (keyword === '' || [...keyword].length > 40 || /\s/.test(keyword))
      errors[`${at}.keyword`] = ['must be one word of at most 40 characters.'];
    else if (
      [
        'stop',
        'stopall',
        'unsubscribe',
        'cancel',
        'end',
        'quit',
        'start',
        'unstop',
        'बंद',
        'रोकें',
        'रुको',
        'शुरू',
      ].includes(keyword)
    )
      errors[`${at}.keyword`] = ['is an opt-out or opt-in word: choose another.'];
    else if (seen.has(`${channel}:${keyword}`))
      errors[at] = ['the same keyword is given twice on this channel.'];
    seen.add(`${channel}:${keyword}`);
    triggers.push({ channel, keyword });
  });
  return triggers;
}

const TEMPLATE_REF = /^tpl_\d{1,15}$/;

function checkTemplates(raw: unknown, field: string, errors: FieldErrors): Templates {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    errors[field] = [
      'must be an object of templates by channel, e.g. { "sms": "tpl_3", "whatsapp": "tpl_4" }.',
    ];
    return {};
  }
  const templates: Templates = {};
  for (const [channel, ref] of Object.entries(raw as Record<string, unknown>)) {
    if (channel !== 'sms' && channel !== 'whatsapp') {
      errors[field] = [`"${channel.slice(0, 20)}" is not a channel with templates: use sms or whatsapp.`];
      continue;
    }
    if (ref === null || ref === undefined || ref === '') continue;
    if (typeof ref !== 'string' || !TEMPLATE_REF.test(ref))
      errors[`${field}.${channel}`] = ['must be a template id such as tpl_3.'];
    else templates[channel] = ref;
  }
  return templates;
}

/** An intro or outro as given: its texts by language, and the templates it goes as. */
function checkFraming(
  raw: unknown,
  field: string,
  errors: FieldErrors,
): { texts: Texts; templates: Templates } {
  if (raw && typeof raw === 'object' && !Array.isArray(raw) && 'templates' in raw) {
    const { templates, ...texts } = raw as Record<string, unknown>;
    return {
      texts: checkTexts(texts, field, errors, false),
      templates: checkTemplates(templates, `${field}.templates`, errors),
    };
  }
  return { texts: checkTexts(raw, field, errors, false), templates: {} };
}

/** An intro or outro as stored and answered: its texts, and `templates` where it has any. */
export function framing(texts: Texts, templates: Templates): Record<string, unknown> {
  return Object.keys(templates).length > 0 ? { ...texts, templates } : texts;
}

/** A stored intro or outro split into its texts and templates. */
export function splitFraming(stored: Record<string, unknown>): { texts: Texts; templates: Templates } {
  const { templates, ...texts } = stored;
  return { texts: texts as Texts, templates: (templates ?? {}) as Templates };
}

/** The SMS template of a question (`templates.sms`, or the earlier `template_id`). */
export const smsTemplateOf = (q: Pick<Question, 'templates' | 'template_id'>) =>
  q.templates?.sms ?? q.template_id;

/** A survey's definition checked against the workspace's custom fields; `errors` gets what does not hold. */
export function checkDefinition(
  raw: { intro?: unknown; outro?: unknown; questions?: unknown; retries?: unknown; triggers?: unknown },
  defs: readonly VoterFieldDef[],
  errors: FieldErrors,
): SurveyDefinition {
  const retries = raw.retries ?? 2;
  if (typeof retries !== 'number' || !Number.isInteger(retries) || retries < 0 || retries > RETRIES_MAX)
    errors.retries = [`must be a whole number from 0 to ${RETRIES_MAX}.`];
  const intro = checkFraming(raw.intro, 'intro', errors);
  const outro = checkFraming(raw.outro, 'outro', errors);
  return {
    intro: intro.texts,
    outro: outro.texts,
    introTemplates: intro.templates,
    outroTemplates: outro.templates,
    questions: checkQuestions(raw.questions, defs, errors),
    retries: typeof retries === 'number' ? retries : 2,
    triggers: checkTriggers(raw.triggers, errors),
  };
}

/** The voter's language where the texts have it, else the first. */
export function textIn(texts: Texts, language: string): string {
  return texts[language] ?? firstText(texts);
}

/** The language a contact is asked in: theirs where the survey's first question has it, else the survey's first. */
export function languageFor(
  questions: readonly Question[],
  voterLanguage: string | null | undefined,
): string {
  const texts = questions[0]?.text ?? {};
  if (voterLanguage && texts[voterLanguage] !== undefined) return voterLanguage;
  return Object.keys(texts)[0] ?? 'en';
}

const AGAIN: Texts = {
  en: 'Sorry, we did not understand that.',
  hi: 'क्षमा करें, हम यह नहीं समझ पाए।',
};

/**
 * A question as a text message: the intro first (on the first question), then the question, then each choice as
 * "key. label" on its own line; a re-ask starts with an apology.
 */
export function questionText(
  survey: Pick<SurveyDefinition, 'intro'>,
  q: Question,
  language: string,
  options: { first?: boolean; again?: boolean } = {},
): string {
  const lines: string[] = [];
  if (options.again) lines.push(textIn(AGAIN, language));
  if (options.first && Object.keys(survey.intro).length > 0) lines.push(textIn(survey.intro, language));
  lines.push(textIn(q.text, language));
  for (const c of q.choices ?? []) lines.push(`${c.key}. ${textIn(c.label, language)}`);
  return lines.join('\n');
}

/** What a question's answer is stored as. */
export interface AnswerValue {
  choice_key: string | null;
  number_value: number | null;
  text_value: string | null;
}

export const OTHER: AnswerValue = { choice_key: 'other', number_value: null, text_value: null };

/**
 * An answer matched to the question, or undefined when it does not match (asked again): a choice by its key
 * (Devanagari digits read as digits), its label in any language or a keyword, compared in the place-name form;
 * a number within min..max; any text (trimmed, at most ANSWER_TEXT_MAX characters).
 */
export function matchAnswer(q: Question, raw: string): AnswerValue | undefined {
  const text = asciiDigits(placeText(raw));
  if (text === '') return undefined;
  if (q.type === 'text')
    return { choice_key: null, number_value: null, text_value: [...text].slice(0, ANSWER_TEXT_MAX).join('') };
  if (q.type === 'number') {
    const n = /^[+-]?\d+(\.\d+)?$/.test(text) ? Number(text) : NaN;
    if (!Number.isFinite(n)) return undefined;
    if ((q.min !== undefined && n < q.min) || (q.max !== undefined && n > q.max)) return undefined;
    return { choice_key: null, number_value: n, text_value: null };
  }
  const said = answerKey(text);
  for (const c of q.choices ?? []) {
    const words = [c.key, ...Object.values(c.label), ...(c.keywords ?? [])].map((w) =>
      answerKey(asciiDigits(w)),
    );
    if (words.includes(said)) return { choice_key: c.key, number_value: null, text_value: null };
  }
  return undefined;
}

/** An answer as a response shows it: the choice key, the number or the text. */
export function shownAnswer(a: AnswerValue): string | number | null {
  return a.choice_key ?? a.number_value ?? a.text_value;
}
