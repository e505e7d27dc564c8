// The survey builder: a survey's questions in English and Hindi, its templates by channel, its triggers.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useLocation } from 'wouter';
import { api, envelope } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { ErrorNote, Field, Table } from '../ui.tsx';
import { commaList, useVoterFields } from './voter-shared.ts';
import { keys, queries, useWorkspace } from '../queries.ts';
import { channels, type Question, type Survey } from './surveys.tsx';

interface ChoiceDraft {
  key: string;
  en: string;
  hi: string;
  keywords: string;
}
interface QuestionDraft {
  key: string;
  type: 'choice' | 'number' | 'text';
  en: string;
  hi: string;
  choices: ChoiceDraft[];
  min: string;
  max: string;
  saveTo: string;
  /** The templates it goes as: SMS (DLT), and WhatsApp (the first question opens the session with it). */
  smsTemplate: string;
  whatsappTemplate: string;
}

const newChoice = (n: number): ChoiceDraft => ({ key: String(n), en: '', hi: '', keywords: '' });
const newQuestion = (n: number): QuestionDraft => ({
  key: `q${n}`,
  type: 'choice',
  en: '',
  hi: '',
  choices: [newChoice(1), newChoice(2)],
  min: '',
  max: '',
  saveTo: '',
  smsTemplate: '',
  whatsappTemplate: '',
});

/** Texts in English and Hindi, the Hindi left out when empty. */
const texts = (en: string, hi: string) => ({
  ...(en.trim() ? { en: en.trim() } : {}),
  ...(hi.trim() ? { hi: hi.trim() } : {}),
});

function asQuestion(q: QuestionDraft): Question {
  return {
    key: q.key.trim(),
    type: q.type,
    text: texts(q.en, q.hi),
    ...(q.type === 'choice'
      ? {
          choices: q.choices.map((c) => ({
            key: c.key.trim(),
            label: texts(c.en, c.hi),
            ...(c.keywords.trim() ? { keywords: commaList(c.keywords) } : {}),
          })),
        }
      : {}),
    ...(q.type === 'number' && q.min !== '' ? { min: Number(q.min) } : {}),
    ...(q.type === 'number' && q.max !== '' ? { max: Number(q.max) } : {}),
    ...(q.saveTo ? { save_to: q.saveTo } : {}),
    ...(q.smsTemplate || q.whatsappTemplate
      ? {
          templates: {
            ...(q.smsTemplate ? { sms: q.smsTemplate } : {}),
            ...(q.whatsappTemplate ? { whatsapp: q.whatsappTemplate } : {}),
          },
        }
      : {}),
  };
}

/** The workspace's templates for SMS and WhatsApp, as the builder's pickers offer them. */
function useChannelTemplates() {
  const sms = useQuery(queries.templates('sms'));
  const whatsapp = useQuery(queries.templates('whatsapp'));
  return { data: { sms: sms.data?.data ?? [], whatsapp: whatsapp.data?.data ?? [] } };
}

/**
 * The channels a question can go on, as the workspace's gateways stand: a templates-only SMS channel (DLT)
 * needs its SMS template, a templates-only WhatsApp channel the first question's WhatsApp template.
 */
function channelsFor(
  q: Pick<QuestionDraft, 'smsTemplate' | 'whatsappTemplate'>,
  first: boolean,
  templatesOnly: { sms: boolean; whatsapp: boolean },
): Array<(typeof channels)[number]> {
  return channels.filter((c) =>
    c === 'sms'
      ? !templatesOnly.sms || q.smsTemplate !== ''
      : c === 'whatsapp'
        ? !first || !templatesOnly.whatsapp || q.whatsappTemplate !== ''
        : true,
  );
}

/** A template picker of the builder: the workspace's templates of one channel. */
function TemplatePicker(props: {
  label: string;
  hint: string;
  value: string;
  options: Array<{ id: string; name: string }>;
  onChange: (id: string) => void;
}) {
  const { t } = useI18n();
  return (
    <Field label={props.label} hint={props.hint}>
      <select value={props.value} onChange={(e) => props.onChange(e.target.value)}>
        <option value="">{t('surveys.template.none')}</option>
        {props.options.map((tpl) => (
          <option key={tpl.id} value={tpl.id}>
            {tpl.name}
          </option>
        ))}
      </select>
    </Field>
  );
}

/** The survey builder: questions in English and Hindi, choices with keys and keywords, where answers are saved. */
export function SurveyBuilder() {
  const { t } = useI18n();
  const [name, setName] = useState('');
  const [intro, setIntro] = useState({ en: '', hi: '' });
  const [outro, setOutro] = useState({ en: '', hi: '' });
  const [outroSms, setOutroSms] = useState('');
  const { templates, templatesOnly } = useSurveyTemplates();
  const [keyword, setKeyword] = useState('');
  const [questions, setQuestions] = useState<QuestionDraft[]>([newQuestion(1)]);
  const change = (i: number, patch: Partial<QuestionDraft>) =>
    setQuestions((qs) => qs.map((q, j) => (j === i ? { ...q, ...patch } : q)));
  const create = useCreateSurvey({ name, intro, outro, outroSms, keyword, questions });
  return (
    <>
      <h1>{t('surveys.new')}</h1>
      <form
        className="stack"
        aria-label={t('surveys.new')}
        onSubmit={(e) => {
          e.preventDefault();
          create.mutate();
        }}
      >
        <Field label={t('field.name')}>
          <input required maxLength={200} value={name} onChange={(e) => setName(e.target.value)} />
        </Field>
        <Bilingual
          label={t('surveys.intro')}
          hint={t('surveys.introHint')}
          value={intro}
          onChange={setIntro}
        />
        {questions.map((q, i) => (
          <QuestionEditor
            key={i}
            q={q}
            i={i}
            change={(patch) => change(i, patch)}
            remove={
              questions.length > 1 ? () => setQuestions(questions.filter((_, j) => j !== i)) : undefined
            }
          />
        ))}
        <button type="button" onClick={() => setQuestions([...questions, newQuestion(questions.length + 1)])}>
          {t('surveys.addQuestion')}
        </button>
        <Bilingual label={t('surveys.outro')} value={outro} onChange={setOutro} />
        <TemplatePicker
          label={t('surveys.template.outroSms')}
          hint={t(templatesOnly.sms ? 'surveys.template.smsRequired' : 'surveys.template.smsHint')}
          value={outroSms}
          options={templates.data?.sms ?? []}
          onChange={setOutroSms}
        />
        <Field label={t('surveys.keyword')} hint={t('surveys.keywordHint')}>
          <input value={keyword} maxLength={40} onChange={(e) => setKeyword(e.target.value)} />
        </Field>
        <ErrorNote error={create.error} />
        <button className="primary" disabled={create.isPending}>
          {t('surveys.create')}
        </button>
      </form>
    </>
  );
}

/** Creates the survey the builder holds (active at once when it has a keyword), and opens its page. */
function useCreateSurvey(form: {
  name: string;
  intro: { en: string; hi: string };
  outro: { en: string; hi: string };
  outroSms: string;
  keyword: string;
  questions: QuestionDraft[];
}) {
  const [, navigate] = useLocation();
  const client = useQueryClient();
  const { name, intro, outro, outroSms, keyword, questions } = form;
  return useMutation({
    mutationFn: () =>
      envelope(
        api.POST('/api/surveys', {
          body: {
            name,
            intro: texts(intro.en, intro.hi),
            // Texts by language beside `templates`: a shape TypeScript's index signatures cannot state.
            outro: {
              ...texts(outro.en, outro.hi),
              ...(outroSms ? { templates: { sms: outroSms } } : {}),
            } as unknown as Survey['outro'],
            questions: questions.map(asQuestion),
            ...(keyword.trim()
              ? {
                  triggers: [{ channel: 'sms' as const, keyword: keyword.trim() }],
                  status: 'active' as const,
                }
              : {}),
          },
        }),
      ),
    onSuccess: (body) => {
      void client.invalidateQueries({ queryKey: keys.surveys });
      navigate(`/surveys/${body.data.id}`);
    },
  });
}

/** The templates each channel may carry the questions in, and whether a channel sends templates only. */
function useSurveyTemplates() {
  const templates = useChannelTemplates();
  const workspace = useWorkspace();
  const templatesOnly = {
    sms: workspace.data?.channels.sms.templates_only ?? false,
    whatsapp: workspace.data?.channels.whatsapp.templates_only ?? false,
  };
  return { templates, templatesOnly };
}

/** A text in English and in Hindi, side by side. */
function Bilingual({
  label,
  hint,
  value,
  onChange,
}: {
  label: string;
  hint?: string;
  value: { en: string; hi: string };
  onChange: (value: { en: string; hi: string }) => void;
}) {
  return (
    <div className="grid-2">
      <Field label={`${label} (English)`} {...(hint ? { hint } : {})}>
        <textarea rows={2} value={value.en} onChange={(e) => onChange({ ...value, en: e.target.value })} />
      </Field>
      <Field label={`${label} (हिन्दी)`}>
        <textarea
          rows={2}
          lang="hi"
          value={value.hi}
          onChange={(e) => onChange({ ...value, hi: e.target.value })}
        />
      </Field>
    </div>
  );
}

/** One question: its key, type and text, its choices or range, its templates and where its answer is saved. */
function QuestionEditor({
  q,
  i,
  change,
  remove,
}: {
  q: QuestionDraft;
  i: number;
  change: (patch: Partial<QuestionDraft>) => void;
  remove: (() => void) | undefined;
}) {
  const { t } = useI18n();
  const fields = useVoterFields();
  const saveTargets = [
    ['', t('surveys.saveNowhere')],
    ['support_level', t('field.support_level')],
    ['tags', t('surveys.saveTags')],
    ...(fields.data ?? []).map((f) => [`field:${f.key}`, f.label]),
  ];
  return (
    <fieldset className="question">
      <legend>{t('surveys.question', { n: i + 1 })}</legend>
      <div className="grid-2">
        <Field label={t('surveys.key')} hint={t('surveys.keyHint')}>
          <input
            required
            pattern="[a-z][a-z0-9_]{0,39}"
            value={q.key}
            onChange={(e) => change({ key: e.target.value })}
          />
        </Field>
        <Field label={t('surveys.type')}>
          <select value={q.type} onChange={(e) => change({ type: e.target.value as QuestionDraft['type'] })}>
            {(['choice', 'number', 'text'] as const).map((ty) => (
              <option key={ty} value={ty}>
                {t(`surveys.type.${ty}`)}
              </option>
            ))}
          </select>
        </Field>
      </div>
      <div className="grid-2">
        <Field label={`${t('surveys.text')} (English)`}>
          <input required value={q.en} onChange={(e) => change({ en: e.target.value })} />
        </Field>
        <Field label={`${t('surveys.text')} (हिन्दी)`}>
          <input lang="hi" value={q.hi} onChange={(e) => change({ hi: e.target.value })} />
        </Field>
      </div>
      {q.type === 'choice' && <ChoiceEditor q={q} change={change} />}
      {q.type === 'number' && (
        <div className="grid-2">
          <Field label={t('surveys.min')}>
            <input type="number" value={q.min} onChange={(e) => change({ min: e.target.value })} />
          </Field>
          <Field label={t('surveys.max')}>
            <input type="number" value={q.max} onChange={(e) => change({ max: e.target.value })} />
          </Field>
        </div>
      )}
      <QuestionTemplates q={q} i={i} change={change} />
      <Field label={t('surveys.saveTo')} hint={t('surveys.saveToHint')}>
        <select value={q.saveTo} onChange={(e) => change({ saveTo: e.target.value })}>
          {saveTargets.map(([value, label]) => (
            <option key={value} value={value}>
              {label}
            </option>
          ))}
        </select>
      </Field>
      {remove && (
        <button type="button" className="danger" onClick={remove}>
          {t('surveys.removeQuestion')}
        </button>
      )}
    </fieldset>
  );
}

/** A choice question's choices: key, labels, keywords. */
function ChoiceEditor({ q, change }: { q: QuestionDraft; change: (patch: Partial<QuestionDraft>) => void }) {
  const { t } = useI18n();
  const changeChoice = (c: number, patch: Partial<ChoiceDraft>) =>
    change({ choices: q.choices.map((x, k) => (k === c ? { ...x, ...patch } : x)) });
  return (
    <>
      {q.type === 'choice' && (
        <Table
          caption={t('surveys.choices')}
          stacked
          head={[
            t('surveys.choiceKey'),
            `${t('surveys.label')} (English)`,
            `${t('surveys.label')} (हिन्दी)`,
            t('surveys.keywords'),
            '',
          ]}
        >
          {q.choices.map((c, k) => (
            <tr key={k}>
              <td data-label={t('surveys.choiceKey')}>
                <input
                  aria-label={t('surveys.choiceKey')}
                  required
                  size={3}
                  value={c.key}
                  onChange={(e) => changeChoice(k, { key: e.target.value })}
                />
              </td>
              <td data-label={`${t('surveys.label')} (English)`}>
                <input
                  aria-label={`${t('surveys.label')} (English)`}
                  required
                  value={c.en}
                  onChange={(e) => changeChoice(k, { en: e.target.value })}
                />
              </td>
              <td data-label={`${t('surveys.label')} (हिन्दी)`}>
                <input
                  aria-label={`${t('surveys.label')} (हिन्दी)`}
                  lang="hi"
                  value={c.hi}
                  onChange={(e) => changeChoice(k, { hi: e.target.value })}
                />
              </td>
              <td data-label={t('surveys.keywords')}>
                <input
                  aria-label={t('surveys.keywords')}
                  value={c.keywords}
                  onChange={(e) => changeChoice(k, { keywords: e.target.value })}
                />
              </td>
              <td>
                {q.choices.length > 2 && (
                  <button
                    type="button"
                    onClick={() => change({ choices: q.choices.filter((_, x) => x !== k) })}
                  >
                    {t('delete')}
                  </button>
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      {q.type === 'choice' && (
        <button
          type="button"
          onClick={() => change({ choices: [...q.choices, newChoice(q.choices.length + 1)] })}
        >
          {t('surveys.addChoice')}
        </button>
      )}
    </>
  );
}

/** The templates a question goes out in, and the channels it can go on with them. */
function QuestionTemplates({
  q,
  i,
  change,
}: {
  q: QuestionDraft;
  i: number;
  change: (patch: Partial<QuestionDraft>) => void;
}) {
  const { t } = useI18n();
  const { templates, templatesOnly } = useSurveyTemplates();
  return (
    <>
      <div className="grid-2">
        <TemplatePicker
          label={t('surveys.template.sms')}
          hint={t(templatesOnly.sms ? 'surveys.template.smsRequired' : 'surveys.template.smsHint')}
          value={q.smsTemplate}
          options={templates.data?.sms ?? []}
          onChange={(id) => change({ smsTemplate: id })}
        />
        <TemplatePicker
          label={t('surveys.template.whatsapp')}
          hint={t(i === 0 ? 'surveys.template.whatsappFirst' : 'surveys.template.whatsappLater')}
          value={q.whatsappTemplate}
          options={templates.data?.whatsapp ?? []}
          onChange={(id) => change({ whatsappTemplate: id })}
        />
      </div>
      <p className="muted" data-testid={`channels-${i}`}>
        {t('surveys.canGoOn', {
          channels: channelsFor(q, i === 0, templatesOnly)
            .map((c) => t(`channel.${c}`))
            .join(', '),
        })}
      </p>
    </>
  );
}
