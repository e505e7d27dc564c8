import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useLocation } from 'wouter';
import { allPages, api, data, download, envelope } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import type { components } from '../schema.d.ts';
import { Badge, Empty, ErrorNote, Field, Loading, Pager, Section, Table } from '../ui.tsx';
import { commaList, useVoterFields } from './voters.tsx';
import { useWorkspace } from '../queries.ts';

type Survey = components['schemas']['Survey'];
type Question = components['schemas']['SurveyQuestion'];
type Results = components['schemas']['SurveyResults'];

const channels = ['sms', 'whatsapp', 'ivr'] as const;
const groupings = ['', 'booth', 'ward', 'constituency', 'part_number'] as const;

/** The survey's text in the console's language where it has it, else its first. */
function inLang(texts: Record<string, string> | undefined, lang: string): string {
  if (!texts) return '';
  return texts[lang] ?? Object.values(texts)[0] ?? '';
}

/** A response's answers as text: each question's key, and a choice's label beside its key. */
function answersText(survey: Survey, answers: Record<string, string | number | null>, lang: string): string {
  return Object.entries(answers)
    .map(([key, value]) => {
      const choice = survey.questions.find((q) => q.key === key)?.choices?.find((c) => c.key === value);
      return `${key}: ${value ?? ''}${choice ? ` (${inLang(choice.label, lang)})` : ''}`;
    })
    .join('; ');
}

/** Surveys, newest first. */
export function Surveys() {
  const { t, d } = useI18n();
  const [page, setPage] = useState(1);
  const list = useQuery({
    queryKey: ['surveys', page],
    queryFn: () => data(api.GET('/api/surveys', { params: { query: { page, per_page: 25 } } })),
    placeholderData: keepPreviousData,
  });
  return (
    <>
      <div className="page-head">
        <h1>{t('nav.surveys')}</h1>
        <Link href="/surveys/new" className="button primary">
          {t('surveys.new')}
        </Link>
      </div>
      <p className="muted">{t('surveys.help')}</p>
      <ErrorNote error={list.error} />
      {list.isPending ? (
        <Loading />
      ) : list.data?.data.length === 0 ? (
        <Empty>{t('surveys.none')}</Empty>
      ) : (
        <>
          <Table
            caption={t('nav.surveys')}
            head={[t('field.name'), t('field.status'), t('surveys.questions'), t('field.created')]}
          >
            {list.data?.data.map((s) => (
              <tr key={s.id}>
                <td>
                  <Link href={`/surveys/${s.id}`}>{s.name}</Link>
                </td>
                <td>
                  <Badge value={t(`surveys.status.${s.status}`)} />
                </td>
                <td>{s.questions.length}</td>
                <td>{d(s.created_at)}</td>
              </tr>
            ))}
          </Table>
          {list.data && <Pager page={page} lastPage={list.data.last_page} onPage={setPage} />}
        </>
      )}
    </>
  );
}

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
  const read = (channel: 'sms' | 'whatsapp') =>
    allPages((page) =>
      data(api.GET('/api/templates', { params: { query: { page, per_page: 100, channel } } })),
    );
  return useQuery({
    queryKey: ['templates', 'survey-builder'],
    queryFn: async () => ({ sms: (await read('sms')).data, whatsapp: (await read('whatsapp')).data }),
  });
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
  const [, navigate] = useLocation();
  const client = useQueryClient();
  const fields = useVoterFields();
  const [name, setName] = useState('');
  const [intro, setIntro] = useState({ en: '', hi: '' });
  const [outro, setOutro] = useState({ en: '', hi: '' });
  const [outroSms, setOutroSms] = useState('');
  const templates = useChannelTemplates();
  const workspace = useWorkspace();
  const templatesOnly = {
    sms: workspace.data?.channels.sms.templates_only ?? false,
    whatsapp: workspace.data?.channels.whatsapp.templates_only ?? false,
  };
  const [keyword, setKeyword] = useState('');
  const [questions, setQuestions] = useState<QuestionDraft[]>([newQuestion(1)]);
  const change = (i: number, patch: Partial<QuestionDraft>) =>
    setQuestions((qs) => qs.map((q, j) => (j === i ? { ...q, ...patch } : q)));
  const changeChoice = (i: number, c: number, patch: Partial<ChoiceDraft>) =>
    change(i, { choices: questions[i]!.choices.map((x, k) => (k === c ? { ...x, ...patch } : x)) });
  const create = useMutation({
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
      void client.invalidateQueries({ queryKey: ['surveys'] });
      navigate(`/surveys/${body.data.id}`);
    },
  });
  const saveTargets = [
    ['', t('surveys.saveNowhere')],
    ['support_level', t('field.support_level')],
    ['tags', t('surveys.saveTags')],
    ...(fields.data ?? []).map((f) => [`field:${f.key}`, f.label]),
  ];
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
        <div className="grid-2">
          <Field label={`${t('surveys.intro')} (English)`} hint={t('surveys.introHint')}>
            <textarea
              rows={2}
              value={intro.en}
              onChange={(e) => setIntro({ ...intro, en: e.target.value })}
            />
          </Field>
          <Field label={`${t('surveys.intro')} (हिन्दी)`}>
            <textarea
              rows={2}
              lang="hi"
              value={intro.hi}
              onChange={(e) => setIntro({ ...intro, hi: e.target.value })}
            />
          </Field>
        </div>
        {questions.map((q, i) => (
          <fieldset key={i} className="question">
            <legend>{t('surveys.question', { n: i + 1 })}</legend>
            <div className="grid-2">
              <Field label={t('surveys.key')} hint={t('surveys.keyHint')}>
                <input
                  required
                  pattern="[a-z][a-z0-9_]{0,39}"
                  value={q.key}
                  onChange={(e) => change(i, { key: e.target.value })}
                />
              </Field>
              <Field label={t('surveys.type')}>
                <select
                  value={q.type}
                  onChange={(e) => change(i, { type: e.target.value as QuestionDraft['type'] })}
                >
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
                <input required value={q.en} onChange={(e) => change(i, { en: e.target.value })} />
              </Field>
              <Field label={`${t('surveys.text')} (हिन्दी)`}>
                <input lang="hi" value={q.hi} onChange={(e) => change(i, { hi: e.target.value })} />
              </Field>
            </div>
            {q.type === 'choice' && (
              <Table
                caption={t('surveys.choices')}
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
                    <td>
                      <input
                        aria-label={t('surveys.choiceKey')}
                        required
                        size={3}
                        value={c.key}
                        onChange={(e) => changeChoice(i, k, { key: e.target.value })}
                      />
                    </td>
                    <td>
                      <input
                        aria-label={`${t('surveys.label')} (English)`}
                        required
                        value={c.en}
                        onChange={(e) => changeChoice(i, k, { en: e.target.value })}
                      />
                    </td>
                    <td>
                      <input
                        aria-label={`${t('surveys.label')} (हिन्दी)`}
                        lang="hi"
                        value={c.hi}
                        onChange={(e) => changeChoice(i, k, { hi: e.target.value })}
                      />
                    </td>
                    <td>
                      <input
                        aria-label={t('surveys.keywords')}
                        value={c.keywords}
                        onChange={(e) => changeChoice(i, k, { keywords: e.target.value })}
                      />
                    </td>
                    <td>
                      {q.choices.length > 2 && (
                        <button
                          type="button"
                          onClick={() => change(i, { choices: q.choices.filter((_, x) => x !== k) })}
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
                onClick={() => change(i, { choices: [...q.choices, newChoice(q.choices.length + 1)] })}
              >
                {t('surveys.addChoice')}
              </button>
            )}
            {q.type === 'number' && (
              <div className="grid-2">
                <Field label={t('surveys.min')}>
                  <input type="number" value={q.min} onChange={(e) => change(i, { min: e.target.value })} />
                </Field>
                <Field label={t('surveys.max')}>
                  <input type="number" value={q.max} onChange={(e) => change(i, { max: e.target.value })} />
                </Field>
              </div>
            )}
            <div className="grid-2">
              <TemplatePicker
                label={t('surveys.template.sms')}
                hint={t(templatesOnly.sms ? 'surveys.template.smsRequired' : 'surveys.template.smsHint')}
                value={q.smsTemplate}
                options={templates.data?.sms ?? []}
                onChange={(id) => change(i, { smsTemplate: id })}
              />
              <TemplatePicker
                label={t('surveys.template.whatsapp')}
                hint={t(i === 0 ? 'surveys.template.whatsappFirst' : 'surveys.template.whatsappLater')}
                value={q.whatsappTemplate}
                options={templates.data?.whatsapp ?? []}
                onChange={(id) => change(i, { whatsappTemplate: id })}
              />
            </div>
            <p className="muted" data-testid={`channels-${i}`}>
              {t('surveys.canGoOn', {
                channels: channelsFor(q, i === 0, templatesOnly)
                  .map((c) => t(`channel.${c}`))
                  .join(', '),
              })}
            </p>
            <Field label={t('surveys.saveTo')} hint={t('surveys.saveToHint')}>
              <select value={q.saveTo} onChange={(e) => change(i, { saveTo: e.target.value })}>
                {saveTargets.map(([value, label]) => (
                  <option key={value} value={value}>
                    {label}
                  </option>
                ))}
              </select>
            </Field>
            {questions.length > 1 && (
              <button
                type="button"
                className="danger"
                onClick={() => setQuestions(questions.filter((_, j) => j !== i))}
              >
                {t('surveys.removeQuestion')}
              </button>
            )}
          </fieldset>
        ))}
        <button type="button" onClick={() => setQuestions([...questions, newQuestion(questions.length + 1)])}>
          {t('surveys.addQuestion')}
        </button>
        <div className="grid-2">
          <Field label={`${t('surveys.outro')} (English)`}>
            <textarea
              rows={2}
              value={outro.en}
              onChange={(e) => setOutro({ ...outro, en: e.target.value })}
            />
          </Field>
          <Field label={`${t('surveys.outro')} (हिन्दी)`}>
            <textarea
              rows={2}
              lang="hi"
              value={outro.hi}
              onChange={(e) => setOutro({ ...outro, hi: e.target.value })}
            />
          </Field>
        </div>
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

/** One question's results: a bar chart and, beside it, the same numbers in a table. */
function QuestionResults({
  survey,
  result,
  grouped,
}: {
  survey: Survey;
  result: Results['questions'][number];
  grouped: boolean;
}) {
  const { t, lang, n } = useI18n();
  const question = survey.questions.find((q) => q.key === result.key);
  const label = (key: string) =>
    key === 'other'
      ? t('surveys.other')
      : inLang(question?.choices?.find((c) => c.key === key)?.label, lang) || key;
  const title = `${inLang(question?.text, lang)} (${t('surveys.answered', { n: n(result.answered) })})`;
  if (result.type !== 'choice')
    return (
      <section className="result">
        <h3>{title}</h3>
        {result.type === 'number' && (
          <p>
            {t('surveys.mean')}: <strong>{result.mean ?? '—'}</strong>
          </p>
        )}
        {grouped && result.groups && (
          <Table
            caption={title}
            head={[
              t('surveys.group'),
              t('surveys.answeredHead'),
              ...(result.type === 'number' ? [t('surveys.mean')] : []),
            ]}
          >
            {result.groups.map((g) => (
              <tr key={String(g.group)}>
                <td>{g.group ?? t('surveys.noGroup')}</td>
                <td>{n(g.answered)}</td>
                {result.type === 'number' && <td>{g.mean ?? '—'}</td>}
              </tr>
            ))}
          </Table>
        )}
      </section>
    );
  const rows =
    grouped && result.groups
      ? result.groups
      : [{ group: null, answered: result.answered, choices: result.choices }];
  const keys = (result.choices ?? []).map((c) => c.key);
  const most = Math.max(1, ...rows.flatMap((r) => (r.choices ?? []).map((c) => c.count)));
  return (
    <section className="result">
      <h3>{title}</h3>
      <div className="result-grid">
        <figure className="bars" aria-hidden="true">
          {rows.map((r) => (
            <div key={String(r.group)} className="bar-group">
              {grouped && <div className="bar-group-name">{r.group ?? t('surveys.noGroup')}</div>}
              {(r.choices ?? []).map((c) => (
                <div key={c.key} className="bar-row">
                  <span className="bar-label">{label(c.key)}</span>
                  <span className="bar" style={{ width: `${(c.count / most) * 100}%` }} />
                  <span className="bar-value">{n(c.count)}</span>
                </div>
              ))}
            </div>
          ))}
        </figure>
        <Table
          caption={title}
          head={[...(grouped ? [t('surveys.group')] : []), ...keys.map(label), t('surveys.answeredHead')]}
        >
          {rows.map((r) => (
            <tr key={String(r.group)}>
              {grouped && <td>{r.group ?? t('surveys.noGroup')}</td>}
              {keys.map((k) => (
                <td key={k}>{n(r.choices?.find((c) => c.key === k)?.count ?? 0)}</td>
              ))}
              <td>{n(r.answered)}</td>
            </tr>
          ))}
        </Table>
      </div>
    </section>
  );
}

/** A survey: its questions, runs with live progress, results by place, and responses with their export. */
export function SurveyPage({ id }: { id: string }) {
  const { t, lang, n, d, code } = useI18n();
  const client = useQueryClient();
  const [channel, setChannel] = useState<(typeof channels)[number]>('sms');
  const [segment, setSegment] = useState('');
  const [groupBy, setGroupBy] = useState<(typeof groupings)[number]>('');
  const [page, setPage] = useState(1);
  const survey = useQuery({
    queryKey: ['survey', id],
    queryFn: () => data(api.GET('/api/surveys/{id}', { params: { path: { id } } })),
  });
  const runs = useQuery({
    queryKey: ['survey-runs', id],
    queryFn: () =>
      data(api.GET('/api/surveys/{id}/runs', { params: { path: { id }, query: { page: 1, per_page: 20 } } })),
    refetchInterval: 3_000,
  });
  const results = useQuery({
    queryKey: ['survey-results', id, groupBy],
    queryFn: () =>
      data(
        api.GET('/api/surveys/{id}/results', {
          params: { path: { id }, query: groupBy ? { group_by: groupBy } : {} },
        }),
      ),
    refetchInterval: 5_000,
  });
  const responses = useQuery({
    queryKey: ['survey-responses', id, page],
    queryFn: () =>
      data(
        api.GET('/api/surveys/{id}/responses', { params: { path: { id }, query: { page, per_page: 25 } } }),
      ),
    placeholderData: keepPreviousData,
    refetchInterval: 5_000,
  });
  const segments = useQuery({
    queryKey: ['segments', 'all'],
    queryFn: () =>
      allPages((p) => data(api.GET('/api/segments', { params: { query: { page: p, per_page: 100 } } }))),
  });
  const refresh = () => {
    for (const key of ['survey', 'survey-runs', 'survey-results', 'survey-responses'])
      void client.invalidateQueries({ queryKey: [key, id] });
  };
  const start = useMutation({
    mutationFn: () =>
      envelope(
        api.POST('/api/surveys/{id}/runs', {
          params: { path: { id } },
          body: { channel, segment_id: segment },
        }),
      ),
    onSuccess: refresh,
  });
  const cancel = useMutation({
    mutationFn: (run: string) =>
      envelope(api.POST('/api/survey-runs/{id}/cancel', { params: { path: { id: run } } })),
    onSuccess: refresh,
  });
  const close = useMutation({
    mutationFn: () =>
      envelope(api.PATCH('/api/surveys/{id}', { params: { path: { id } }, body: { status: 'closed' } })),
    onSuccess: refresh,
  });
  const runColumns = [
    t('field.channel'),
    t('field.status'),
    t('surveys.recipients'),
    t('surveys.started'),
    t('surveys.completed'),
    t('surveys.partial'),
    t('surveys.noAnswer'),
    t('surveys.optedOut'),
    t('surveys.failed'),
    t('field.created'),
  ];
  if (survey.isPending) return <Loading />;
  if (!survey.data) return <ErrorNote error={survey.error} />;
  const s = survey.data;
  return (
    <>
      <div className="page-head">
        <h1>
          {s.name} <Badge value={t(`surveys.status.${s.status}`)} />
        </h1>
        {s.status !== 'closed' && (
          <button
            type="button"
            className="danger"
            onClick={() => {
              if (window.confirm(t('surveys.confirmClose'))) close.mutate();
            }}
          >
            {t('surveys.close')}
          </button>
        )}
      </div>
      <ErrorNote error={close.error} />
      <Section title={t('surveys.questions')}>
        <ol>
          {s.questions.map((q) => (
            <li key={q.key}>
              {inLang(q.text, lang)} <code>{q.key}</code> <Badge value={t(`surveys.type.${q.type}`)} />
              {q.choices && (
                <span className="muted">
                  {' '}
                  — {q.choices.map((c) => `${c.key}. ${inLang(c.label, lang)}`).join(', ')}
                </span>
              )}
              {(q.templates?.sms ?? q.template_id) && (
                <span className="muted">
                  {' '}
                  · {t('surveys.template.smsShort', { id: q.templates?.sms ?? q.template_id ?? '' })}
                </span>
              )}
              {q.templates?.whatsapp && (
                <span className="muted">
                  {' '}
                  · {t('surveys.template.whatsappShort', { id: q.templates.whatsapp })}
                </span>
              )}
            </li>
          ))}
        </ol>
      </Section>
      <Section title={t('surveys.runs')}>
        {s.status !== 'closed' && (
          <form
            className="filters"
            aria-label={t('surveys.start')}
            onSubmit={(e) => {
              e.preventDefault();
              start.mutate();
            }}
          >
            <Field label={t('field.channel')}>
              <select
                value={channel}
                onChange={(e) => setChannel(e.target.value as (typeof channels)[number])}
              >
                {channels.map((c) => (
                  <option key={c} value={c}>
                    {t(`channel.${c}`)}
                  </option>
                ))}
              </select>
            </Field>
            <Field label={t('surveys.segment')}>
              <select required value={segment} onChange={(e) => setSegment(e.target.value)}>
                <option value="">{t('surveys.chooseSegment')}</option>
                {(segments.data?.data ?? []).map((sg) => (
                  <option key={sg.id} value={String(sg.id)}>
                    {sg.name}
                  </option>
                ))}
              </select>
            </Field>
            <button className="primary" disabled={start.isPending}>
              {t('surveys.start')}
            </button>
            <ErrorNote error={start.error} />
          </form>
        )}
        <ErrorNote error={runs.error ?? cancel.error} />
        {runs.data?.data.length === 0 ? (
          <Empty>{t('surveys.noRuns')}</Empty>
        ) : (
          <Table caption={t('surveys.runs')} head={[...runColumns, '']} stacked>
            {(runs.data?.data ?? []).map((r) => (
              <tr key={r.id}>
                <td data-label={runColumns[0]}>{t(`channel.${r.channel as 'sms'}`)}</td>
                <td data-label={runColumns[1]}>
                  <Badge value={t(`surveys.run.${r.status}`)} />
                </td>
                <td data-label={runColumns[2]}>{n(r.recipients)}</td>
                <td data-label={runColumns[3]}>{n(r.started)}</td>
                <td data-label={runColumns[4]}>{n(r.completed)}</td>
                <td data-label={runColumns[5]}>{n(r.partial)}</td>
                <td data-label={runColumns[6]}>{n(r.no_answer)}</td>
                <td data-label={runColumns[7]}>{n(r.opted_out)}</td>
                <td data-label={runColumns[8]}>
                  {n(r.failed)}
                  {r.last_error && (
                    <small className="block" data-testid="run-last-error">
                      {t('campaign.lastError', { when: d(r.last_error.at) })} {code(r.last_error.error_code)}{' '}
                      (<code>{r.last_error.error_code}</code>) {r.last_error.error_message}
                    </small>
                  )}
                </td>
                <td data-label={runColumns[9]} className="nowrap">
                  {d(r.created_at)}
                </td>
                <td>
                  {(r.status === 'running' || r.status === 'scheduled') && (
                    <button type="button" onClick={() => cancel.mutate(r.id)}>
                      {t('cancel')}
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </Table>
        )}
      </Section>
      <Section
        title={t('surveys.results')}
        actions={
          <label className="inline">
            {t('surveys.groupBy')}{' '}
            <select
              value={groupBy}
              onChange={(e) => setGroupBy(e.target.value as (typeof groupings)[number])}
            >
              {groupings.map((g) => (
                <option key={g} value={g}>
                  {g ? t(`surveys.by.${g}`) : t('surveys.by.none')}
                </option>
              ))}
            </select>
          </label>
        }
      >
        <ErrorNote error={results.error} />
        {results.data && (
          <>
            <p>
              {t('surveys.summary', {
                responses: n(results.data.responses),
                completed: n(results.data.completed),
              })}
            </p>
            {results.data.questions.map((q) => (
              <QuestionResults key={q.key} survey={s} result={q} grouped={groupBy !== ''} />
            ))}
          </>
        )}
      </Section>
      <Section
        title={t('surveys.responses')}
        actions={
          <span className="actions">
            <button
              type="button"
              onClick={() =>
                void download(`/api/surveys/${id}/responses/export?format=csv`, `survey-${id}.csv`)
              }
            >
              {t('surveys.exportCsv')}
            </button>{' '}
            <button
              type="button"
              onClick={() =>
                void download(`/api/surveys/${id}/responses/export?format=excel`, `survey-${id}.xlsx`)
              }
            >
              {t('surveys.exportExcel')}
            </button>
          </span>
        }
      >
        <ErrorNote error={responses.error} />
        {responses.data?.data.length === 0 ? (
          <Empty>{t('surveys.noResponses')}</Empty>
        ) : (
          <>
            <Table
              caption={t('surveys.responses')}
              head={[
                t('surveys.contact'),
                t('field.channel'),
                t('field.status'),
                t('surveys.answers'),
                t('surveys.startedAt'),
              ]}
            >
              {(responses.data?.data ?? []).map((r) => (
                <tr key={r.id}>
                  <td>
                    {r.voter_id !== null ? (
                      <Link href={`/voters/${r.voter_id}`}>{r.address}</Link>
                    ) : (
                      r.address
                    )}
                  </td>
                  <td>{t(`channel.${r.channel as 'sms'}`)}</td>
                  <td>
                    <Badge value={t(`surveys.response.${r.status}`)} />
                  </td>
                  <td>{answersText(s, r.answers, lang)}</td>
                  <td className="nowrap">{d(r.started_at)}</td>
                </tr>
              ))}
            </Table>
            {responses.data && <Pager page={page} lastPage={responses.data.last_page} onPage={setPage} />}
          </>
        )}
      </Section>
    </>
  );
}
