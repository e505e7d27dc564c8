import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, envelope } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { Badge, Empty, ErrorNote, Field, Loading, Pager, Section, Table } from '../ui.tsx';
import type { components } from '../schema.d.ts';
import { keys, queries } from '../queries.ts';

const statuses = ['open', 'in_progress', 'resolved', 'closed'] as const;
const priorities = ['low', 'normal', 'high', 'urgent'] as const;
type Status = (typeof statuses)[number];
type Priority = (typeof priorities)[number];

/** The grievance queue (due and overdue first to the eye), a new grievance, and one grievance's lifecycle. */
export function Grievances() {
  const { t } = useI18n();
  const [status, setStatus] = useState<Status | ''>('open');
  const [overdue, setOverdue] = useState(false);
  const [page, setPage] = useState(1);
  const [selected, setSelected] = useState<number | null>(null);
  const [adding, setAdding] = useState(false);
  const list = useQuery({
    ...queries.grievanceList({
      page,
      per_page: 25,
      ...(status ? { status } : {}),
      ...(overdue ? { overdue: true } : {}),
    }),
    placeholderData: keepPreviousData,
  });
  return (
    <>
      <div className="page-head">
        <h1>{t('nav.grievances')}</h1>
        <button type="button" onClick={() => setAdding(!adding)} aria-expanded={adding}>
          {t('grievances.new')}
        </button>
      </div>
      {adding && <NewGrievance onDone={() => setAdding(false)} />}
      <div className="filters">
        <Field label={t('field.status')}>
          <select value={status} onChange={(e) => setStatus(e.target.value as Status | '')}>
            <option value="">{t('filter.all')}</option>
            {statuses.map((s) => (
              <option key={s} value={s}>
                {t(`status.${s}`)}
              </option>
            ))}
          </select>
        </Field>
        <label className="check">
          <input type="checkbox" checked={overdue} onChange={(e) => setOverdue(e.target.checked)} />
          {t('grievances.overdueOnly')}
        </label>
      </div>
      <ErrorNote error={list.error} />
      {list.isPending ? (
        <Loading />
      ) : list.data?.data.length === 0 ? (
        <Empty>{t('grievances.none')}</Empty>
      ) : (
        <>
          <GrievanceTable grievances={list.data?.data ?? []} select={setSelected} />
          <Pager page={page} lastPage={list.data?.last_page ?? 1} onPage={setPage} />
        </>
      )}
      {selected && <GrievancePanel id={selected} onClose={() => setSelected(null)} />}
    </>
  );
}

type GrievanceRow = components['schemas']['Grievance'];

/** The grievances of the page, the late ones marked. */
function GrievanceTable({
  grievances,
  select,
}: {
  grievances: GrievanceRow[];
  select: (id: number) => void;
}) {
  const { t, d } = useI18n();
  const now = Date.now();
  return (
    <Table
      caption={t('nav.grievances')}
      head={[
        t('field.title'),
        t('field.status'),
        t('field.priority'),
        t('grievances.due'),
        t('field.constituency'),
      ]}
    >
      {grievances.map((g) => {
        const late = g.due_at && !['resolved', 'closed'].includes(g.status) && Date.parse(g.due_at) < now;
        return (
          <tr key={g.id} className={late ? 'late' : undefined}>
            <td>
              <button type="button" className="link" onClick={() => select(g.id)}>
                {g.title}
              </button>
            </td>
            <td>
              <Badge value={g.status} />
            </td>
            <td>{t(`priority.${g.priority}`)}</td>
            <td>
              {d(g.due_at)} {late && <span className="badge badge-failed">{t('grievances.overdue')}</span>}
            </td>
            <td>{g.constituency}</td>
          </tr>
        );
      })}
    </Table>
  );
}

function NewGrievance({ onDone }: { onDone(): void }) {
  const { t } = useI18n();
  const client = useQueryClient();
  const [title, setTitle] = useState('');
  const [description, setDescription] = useState('');
  const [priority, setPriority] = useState<Priority>('normal');
  const [reporterName, setReporterName] = useState('');
  const [reporterPhone, setReporterPhone] = useState('');
  const create = useMutation({
    mutationFn: () =>
      envelope(
        api.POST('/api/grievances', {
          body: {
            title,
            priority,
            ...(description ? { description } : {}),
            ...(reporterName ? { reporter_name: reporterName } : {}),
            ...(reporterPhone ? { reporter_phone: reporterPhone } : {}),
          },
        }),
      ),
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: keys.grievances });
      onDone();
    },
  });
  return (
    <Section title={t('grievances.new')}>
      <form
        className="form-grid"
        onSubmit={(e) => {
          e.preventDefault();
          create.mutate();
        }}
      >
        <Field label={t('field.title')}>
          <input required value={title} onChange={(e) => setTitle(e.target.value)} />
        </Field>
        <Field label={t('field.priority')}>
          <select value={priority} onChange={(e) => setPriority(e.target.value as Priority)}>
            {priorities.map((p) => (
              <option key={p} value={p}>
                {t(`priority.${p}`)}
              </option>
            ))}
          </select>
        </Field>
        <Field label={t('grievances.reporter')}>
          <input value={reporterName} onChange={(e) => setReporterName(e.target.value)} />
        </Field>
        <Field label={t('field.phone')}>
          <input type="tel" value={reporterPhone} onChange={(e) => setReporterPhone(e.target.value)} />
        </Field>
        <Field label={t('field.description')}>
          <textarea rows={3} value={description} onChange={(e) => setDescription(e.target.value)} />
        </Field>
        <ErrorNote error={create.error} />
        <div className="actions">
          <button className="primary" disabled={create.isPending}>
            {t('save')}
          </button>
          <button type="button" onClick={onDone}>
            {t('cancel')}
          </button>
        </div>
      </form>
    </Section>
  );
}

function GrievancePanel({ id, onClose }: { id: number; onClose(): void }) {
  const { t, d } = useI18n();
  const client = useQueryClient();
  const grievance = useQuery(queries.grievance(id));
  const [note, setNote] = useState('');
  const update = useMutation({
    mutationFn: (body: { status?: Status; priority?: Priority; resolution_note?: string }) =>
      envelope(api.PATCH('/api/grievances/{id}', { params: { path: { id } }, body })),
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: keys.grievances });
      void client.invalidateQueries({ queryKey: [...keys.grievance, id] });
    },
  });
  const g = grievance.data;
  if (grievance.isPending) return <Loading />;
  if (!g) return <ErrorNote error={grievance.error} />;
  return (
    <Section
      title={g.title}
      actions={
        <button type="button" onClick={onClose}>
          {t('close')}
        </button>
      }
    >
      <dl className="facts" data-testid="grievance">
        <dt>{t('field.status')}</dt>
        <dd>
          <Badge value={g.status} />
        </dd>
        <dt>{t('field.priority')}</dt>
        <dd>{t(`priority.${g.priority}`)}</dd>
        <dt>{t('grievances.reporter')}</dt>
        <dd>{[g.reporter_name, g.reporter_phone].filter(Boolean).join(' ') || '—'}</dd>
        <dt>{t('grievances.due')}</dt>
        <dd>{d(g.due_at)}</dd>
        <dt>{t('field.description')}</dt>
        <dd>{g.description || '—'}</dd>
        {g.resolution_note && (
          <>
            <dt>{t('grievances.note')}</dt>
            <dd>{g.resolution_note}</dd>
          </>
        )}
      </dl>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          update.mutate({ status: 'resolved', ...(note ? { resolution_note: note } : {}) });
        }}
      >
        <Field label={t('grievances.note')}>
          <textarea rows={2} value={note} onChange={(e) => setNote(e.target.value)} />
        </Field>
        <ErrorNote error={update.error} />
        <div className="actions">
          {g.status === 'open' && (
            <button type="button" onClick={() => update.mutate({ status: 'in_progress' })}>
              {t('grievances.start')}
            </button>
          )}
          {g.status !== 'resolved' && g.status !== 'closed' && (
            <button className="primary">{t('grievances.resolve')}</button>
          )}
          {g.status === 'resolved' && (
            <button type="button" onClick={() => update.mutate({ status: 'closed' })}>
              {t('grievances.closeIt')}
            </button>
          )}
          {(g.status === 'resolved' || g.status === 'closed') && (
            <button type="button" onClick={() => update.mutate({ status: 'open' })}>
              {t('grievances.reopen')}
            </button>
          )}
        </div>
      </form>
    </Section>
  );
}
