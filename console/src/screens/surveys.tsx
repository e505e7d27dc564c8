import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { useI18n } from '../i18n.tsx';
import type { components } from '../schema.d.ts';
import { Badge, Empty, ErrorNote, Loading, Pager, Table } from '../ui.tsx';
import { queries } from '../queries.ts';

export type Survey = components['schemas']['Survey'];
export type Question = components['schemas']['SurveyQuestion'];
export type Results = components['schemas']['SurveyResults'];

export const channels = ['sms', 'whatsapp', 'ivr'] as const;
export const groupings = ['', 'booth', 'ward', 'constituency', 'part_number'] as const;

/** The survey's text in the console's language where it has it, else its first. */
export function inLang(texts: Record<string, string> | undefined, lang: string): string {
  if (!texts) return '';
  return texts[lang] ?? Object.values(texts)[0] ?? '';
}

/** A response's answers as text: each question's key, and a choice's label beside its key. */
export function answersText(
  survey: Survey,
  answers: Record<string, string | number | null>,
  lang: string,
): string {
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
  const list = useQuery(queries.surveys(page));
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
