// A survey's page: its runs, its results as charts by question and group, and its responses.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { api, download, envelope } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { Badge, Empty, ErrorNote, Field, Loading, Pager, Section, Table } from '../ui.tsx';
import { answersText, channels, groupings, inLang, type Results, type Survey } from './surveys.tsx';
import { keys, queries } from '../queries.ts';
import type { components } from '../schema.d.ts';

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
  if (result.type !== 'choice') return <OtherResults title={title} result={result} grouped={grouped} />;
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

/** A number or text question's results: the mean of numbers, and the count answered per group. */
function OtherResults({
  title,
  result,
  grouped,
}: {
  title: string;
  result: Results['questions'][number];
  grouped: boolean;
}) {
  const { t, n } = useI18n();
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
}

/** A survey: its questions, runs with live progress, results by place, and responses with their export. */
export function SurveyPage({ id }: { id: string }) {
  const { t } = useI18n();
  const client = useQueryClient();
  const survey = useQuery(queries.survey(id));
  const refresh = () => {
    void client.invalidateQueries({ queryKey: [...keys.survey, id] });
  };
  const close = useMutation({
    mutationFn: () =>
      envelope(api.PATCH('/api/surveys/{id}', { params: { path: { id } }, body: { status: 'closed' } })),
    onSuccess: refresh,
  });
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
        <QuestionList survey={s} />
      </Section>
      <SurveyRuns id={id} survey={s} refresh={refresh} />
      <SurveyResults id={id} survey={s} />
      <SurveyResponses id={id} survey={s} />
    </>
  );
}

/** The questions as the voters are asked them, with their choices and templates. */
function QuestionList({ survey: s }: { survey: Survey }) {
  const { t, lang } = useI18n();
  return (
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
  );
}

/** The survey's runs, and (while it is open) a form that starts one for a segment. */
function SurveyRuns({ id, survey: s, refresh }: { id: string; survey: Survey; refresh: () => void }) {
  const { t } = useI18n();
  const runs = useQuery({ ...queries.surveyRuns(id), refetchInterval: 3_000 });
  const cancel = useMutation({
    mutationFn: (run: string) =>
      envelope(api.POST('/api/survey-runs/{id}/cancel', { params: { path: { id: run } } })),
    onSuccess: refresh,
  });
  return (
    <Section title={t('surveys.runs')}>
      {s.status !== 'closed' && <StartRun id={id} refresh={refresh} />}
      <ErrorNote error={runs.error ?? cancel.error} />
      {runs.data?.data.length === 0 ? (
        <Empty>{t('surveys.noRuns')}</Empty>
      ) : (
        <RunsTable runs={runs.data?.data ?? []} cancel={(run) => cancel.mutate(run)} />
      )}
    </Section>
  );
}

function StartRun({ id, refresh }: { id: string; refresh: () => void }) {
  const { t } = useI18n();
  const [channel, setChannel] = useState<(typeof channels)[number]>('sms');
  const [segment, setSegment] = useState('');
  const segments = useQuery(queries.segments());
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
  return (
    <form
      className="filters"
      aria-label={t('surveys.start')}
      onSubmit={(e) => {
        e.preventDefault();
        start.mutate();
      }}
    >
      <Field label={t('field.channel')}>
        <select value={channel} onChange={(e) => setChannel(e.target.value as (typeof channels)[number])}>
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
  );
}

type Run = components['schemas']['SurveyRun'];

function RunsTable({ runs, cancel }: { runs: Run[]; cancel: (run: string) => void }) {
  const { t, n, d, code } = useI18n();
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
  return (
    <Table caption={t('surveys.runs')} head={[...runColumns, '']} stacked>
      {runs.map((r) => (
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
                {t('campaign.lastError', { when: d(r.last_error.at) })} {code(r.last_error.error_code)} (
                <code>{r.last_error.error_code}</code>) {r.last_error.error_message}
              </small>
            )}
          </td>
          <td data-label={runColumns[9]} className="nowrap">
            {d(r.created_at)}
          </td>
          <td>
            {(r.status === 'running' || r.status === 'scheduled') && (
              <button type="button" onClick={() => cancel(r.id)}>
                {t('cancel')}
              </button>
            )}
          </td>
        </tr>
      ))}
    </Table>
  );
}

/** The results by question, optionally grouped by place. */
function SurveyResults({ id, survey: s }: { id: string; survey: Survey }) {
  const { t, n } = useI18n();
  const [groupBy, setGroupBy] = useState<(typeof groupings)[number]>('');
  const results = useQuery({ ...queries.surveyResults(id, groupBy), refetchInterval: 5_000 });
  return (
    <Section
      title={t('surveys.results')}
      actions={
        <label className="inline">
          {t('surveys.groupBy')}{' '}
          <select value={groupBy} onChange={(e) => setGroupBy(e.target.value as (typeof groupings)[number])}>
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
  );
}

/** The responses, a page at a time, and their export. */
function SurveyResponses({ id, survey: s }: { id: string; survey: Survey }) {
  const { t, lang, d } = useI18n();
  const [page, setPage] = useState(1);
  const responses = useQuery({ ...queries.surveyResponses(id, page), refetchInterval: 5_000 });
  return (
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
                  {r.voter_id !== null ? <Link href={`/voters/${r.voter_id}`}>{r.address}</Link> : r.address}
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
  );
}
