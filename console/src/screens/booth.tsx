import { keepPreviousData, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { api, data, liveEvents } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import type { components } from '../schema.d.ts';
import { Empty, ErrorNote, Loading, Pager, Section, Table } from '../ui.tsx';

/**
 * The booth board (politicians and managers): turnout by booth, the supporters voted and not, and the list of
 * supporters not yet marked with a call link each. Poll-day marks arrive on the live stream and refresh it.
 */
export function BoothBoard() {
  const { t } = useI18n();
  const [booth, setBooth] = useState<string | null>(null);
  const turnout = useQuery({
    queryKey: ['turnout'],
    queryFn: () => data(api.GET('/api/poll-day/turnout', { params: { query: { group_by: 'booth' } } })),
  });
  useLiveMarks();
  return (
    <>
      <div className="page-head">
        <h1>{t('nav.booth')}</h1>
      </div>
      <ErrorNote error={turnout.error} />
      {turnout.isPending ? (
        <Loading />
      ) : (turnout.data?.data ?? []).length === 0 ? (
        <Empty>{t('booth.none')}</Empty>
      ) : (
        <TurnoutTable rows={turnout.data?.data ?? []} booth={booth} select={setBooth} />
      )}
      {booth !== null && <ToCall key={booth} booth={booth} />}
    </>
  );
}

/** Marks come in bursts: the board reads again at most once a second after one arrives on the stream. */
function useLiveMarks() {
  const client = useQueryClient();
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stop = liveEvents((type) => {
      if (type !== 'poll_day.marked' || timer) return;
      timer = setTimeout(() => {
        timer = undefined;
        void client.invalidateQueries({ queryKey: ['turnout'] });
        void client.invalidateQueries({ queryKey: ['to-call'] });
      }, 1000);
    });
    return () => {
      clearTimeout(timer);
      stop();
    };
  }, [client]);
}

type TurnoutRow = components['schemas']['Turnout']['data'][number];

function TurnoutTable({
  rows,
  booth,
  select,
}: {
  rows: TurnoutRow[];
  booth: string | null;
  select: (booth: string) => void;
}) {
  const { t, n } = useI18n();
  const pct = (part: number, whole: number) =>
    whole === 0 ? '–' : `${n(Math.round((part * 100) / whole))}%`;
  return (
    <Table
      caption={t('booth.turnout')}
      stacked
      head={[
        t('booth.booth'),
        t('booth.voters'),
        t('booth.voted'),
        t('booth.supporters'),
        t('booth.supportersVoted'),
        '',
      ]}
    >
      {rows.map((row) => {
        const name = row.group === null ? t('booth.noBooth') : String(row.group);
        return (
          <tr key={name}>
            <th scope="row" data-label={t('booth.booth')}>
              {name}
            </th>
            <td data-label={t('booth.voters')}>{n(row.voters)}</td>
            <td data-label={t('booth.voted')}>
              {n(row.voted)} ({pct(row.voted, row.voters)})
            </td>
            <td data-label={t('booth.supporters')}>{n(row.supporters)}</td>
            <td data-label={t('booth.supportersVoted')}>
              {n(row.supporters_voted)} ({pct(row.supporters_voted, row.supporters)})
            </td>
            <td>
              {row.group !== null && (
                <button type="button" aria-pressed={booth === name} onClick={() => select(name)}>
                  {t('booth.showToCall', { n: n(row.supporters - row.supporters_voted) })}
                </button>
              )}
            </td>
          </tr>
        );
      })}
    </Table>
  );
}

/** A booth's supporters not yet marked as voted, in roll order, each with a call link. */
function ToCall({ booth }: { booth: string }) {
  const { t } = useI18n();
  const [page, setPage] = useState(1);
  const toCall = useQuery({
    queryKey: ['to-call', booth, page],
    queryFn: () =>
      data(api.GET('/api/poll-day/to-call', { params: { query: { page, per_page: 50, booth } } })),
    placeholderData: keepPreviousData,
  });
  return (
    <Section title={t('booth.toCall', { booth })}>
      <ErrorNote error={toCall.error} />
      {toCall.data?.data.length === 0 ? (
        <Empty>{t('booth.allVoted')}</Empty>
      ) : (
        <ul className="to-call">
          {(toCall.data?.data ?? []).map((v) => (
            <li key={v.id}>
              <span>
                <strong>{v.name}</strong>{' '}
                <span className="muted">
                  {t('field.serial', { n: v.serial_number ?? '–' })} ·{' '}
                  {t(`support.${v.support_level}` as 'support.1')}
                </span>
              </span>
              {v.phone ? (
                <a className="button" href={`tel:${v.phone}`}>
                  {t('booth.call', { phone: v.phone })}
                </a>
              ) : (
                <span className="muted">{t('booth.noPhone')}</span>
              )}
            </li>
          ))}
        </ul>
      )}
      <Pager page={page} lastPage={toCall.data?.last_page ?? 1} onPage={setPage} />
    </Section>
  );
}
