// Privacy (the DPDP Act): the notice and its public page, voters' requests with their due dates (export, erasure),
// and the breach register. Politicians and managers; the notice, export, erasure and breaches are the politician's.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, data, download, envelope } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { useMe } from '../me.ts';
import type { components } from '../schema.d.ts';
import { Badge, Empty, ErrorNote, Field, Loading, Notice, Pager, Section, Table } from '../ui.tsx';

const requestTypes = ['access', 'correction', 'erasure', 'nomination', 'grievance'] as const;
type RequestType = (typeof requestTypes)[number];
type PrivacyRequest = components['schemas']['PrivacyRequest'];
type Breach = components['schemas']['Breach'];

const privacyKeys = {
  notice: ['privacy', 'notice'],
  requests: ['privacy', 'requests'],
  breaches: ['privacy', 'breaches'],
};

export function Privacy() {
  const { t } = useI18n();
  const politician = useMe().user.role === 'politician';
  return (
    <>
      <h1>{t('nav.privacy')}</h1>
      <NoticeEditor editable={politician} />
      <Requests politician={politician} />
      {politician && <Breaches />}
    </>
  );
}

function NoticeEditor({ editable }: { editable: boolean }) {
  const { t, d } = useI18n();
  const notice = useQuery({
    queryKey: privacyKeys.notice,
    queryFn: () => data(api.GET('/api/privacy/notice')),
  });
  if (notice.isPending) return <Loading />;
  const url = notice.data ? `${window.location.origin}${notice.data.public_url}` : '';
  return (
    <Section title={t('privacy.notice')}>
      <p className="muted">{t('privacy.noticeHint')}</p>
      <p>
        {notice.data?.version
          ? `${t('privacy.version', { version: notice.data.version })} · ${d(notice.data.updated_at)}`
          : t('privacy.noNotice')}{' '}
        ·{' '}
        <a className="public-link" href={notice.data?.public_url} target="_blank" rel="noreferrer">
          {t('privacy.publicPage', { url })}
        </a>
      </p>
      <ErrorNote error={notice.error} />
      {notice.data && <NoticeForm notice={notice.data} editable={editable} />}
    </Section>
  );
}

/** The notice's texts and contact; saving writes a new version. */
function NoticeForm({
  notice,
  editable,
}: {
  notice: { texts: Record<string, string>; contact: string };
  editable: boolean;
}) {
  const { t } = useI18n();
  const client = useQueryClient();
  const [form, setForm] = useState({
    en: notice.texts.en ?? '',
    hi: notice.texts.hi ?? '',
    contact: notice.contact,
  });
  const save = useMutation({
    mutationFn: () =>
      envelope(
        api.PUT('/api/privacy/notice', {
          body: { texts: { en: form.en, ...(form.hi.trim() ? { hi: form.hi } : {}) }, contact: form.contact },
        }),
      ),
    onSuccess: () => void client.invalidateQueries({ queryKey: privacyKeys.notice }),
  });
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        save.mutate();
      }}
    >
      <Field label={t('privacy.textEn')}>
        <textarea
          rows={5}
          required
          readOnly={!editable}
          value={form.en}
          onChange={(e) => setForm({ ...form, en: e.target.value })}
        />
      </Field>
      <Field label={t('privacy.textHi')}>
        <textarea
          rows={5}
          lang="hi"
          readOnly={!editable}
          value={form.hi}
          onChange={(e) => setForm({ ...form, hi: e.target.value })}
        />
      </Field>
      <Field label={t('privacy.contact')}>
        <input
          required
          readOnly={!editable}
          value={form.contact}
          onChange={(e) => setForm({ ...form, contact: e.target.value })}
        />
      </Field>
      {editable && (
        <button className="primary" disabled={save.isPending}>
          {t('privacy.saveNotice')}
        </button>
      )}
      <ErrorNote error={save.error} />
    </form>
  );
}

function Requests({ politician }: { politician: boolean }) {
  const { t } = useI18n();
  const client = useQueryClient();
  const [page, setPage] = useState(1);
  const [overdue, setOverdue] = useState(false);
  const list = useQuery({
    queryKey: [...privacyKeys.requests, page, overdue],
    queryFn: () =>
      data(
        api.GET('/api/privacy/requests', {
          params: { query: { page, per_page: 25, ...(overdue ? { overdue: true } : {}) } },
        }),
      ),
  });
  const refresh = () => client.invalidateQueries({ queryKey: privacyKeys.requests });
  return (
    <Section title={t('privacy.requests')}>
      <p className="muted">{t('privacy.requestsHint')}</p>
      <NewRequest refresh={refresh} />
      <label className="check">
        <input
          type="checkbox"
          checked={overdue}
          onChange={(e) => {
            setOverdue(e.target.checked);
            setPage(1);
          }}
        />{' '}
        {t('privacy.overdueOnly')}
      </label>
      <ErrorNote error={list.error} />
      {list.isPending ? (
        <Loading />
      ) : list.data?.data.length === 0 ? (
        <Empty>{t('none')}</Empty>
      ) : (
        <>
          <Table
            stacked
            caption={t('privacy.requests')}
            head={[
              'ID',
              t('privacy.type'),
              t('privacy.address'),
              t('privacy.status'),
              t('privacy.via'),
              t('privacy.due'),
              '',
            ]}
          >
            {list.data?.data.map((r) => (
              <RequestRow key={r.id} r={r} politician={politician} refresh={refresh} />
            ))}
          </Table>
          <Pager page={page} lastPage={list.data?.last_page ?? 1} onPage={setPage} />
        </>
      )}
    </Section>
  );
}

function RequestRow({
  r,
  politician,
  refresh,
}: {
  r: PrivacyRequest;
  politician: boolean;
  refresh: () => Promise<unknown>;
}) {
  const { t, d } = useI18n();
  return (
    <tr>
      <td data-label="ID">{r.id}</td>
      <td data-label={t('privacy.type')}>{t(`privacy.type.${r.type as RequestType}`)}</td>
      <td data-label={t('privacy.address')}>
        {r.address}
        {r.note && <div className="muted">{r.note}</div>}
      </td>
      <td data-label={t('privacy.status')}>
        <Badge value={r.status} />
      </td>
      <td data-label={t('privacy.via')}>{t(`privacy.via.${r.received_via}`)}</td>
      <td data-label={t('privacy.due')}>
        {d(r.due_at)} {r.overdue && <span className="badge badge-failed">{t('privacy.overdue')}</span>}
      </td>
      <td>
        <RequestActions r={r} politician={politician} refresh={refresh} />
      </td>
    </tr>
  );
}

/** What the office does with a request: verify, complete or reject it; export the person's data; erase them. */
function RequestActions({
  r,
  politician,
  refresh,
}: {
  r: PrivacyRequest;
  politician: boolean;
  refresh: () => Promise<unknown>;
}) {
  const { t, n } = useI18n();
  const closed = r.status === 'completed' || r.status === 'rejected';
  const update = useMutation({
    mutationFn: (status: 'verified' | 'completed' | 'rejected') =>
      envelope(api.PATCH('/api/privacy/requests/{id}', { params: { path: { id: r.id } }, body: { status } })),
    onSuccess: refresh,
  });
  const erase = useMutation({
    mutationFn: () =>
      envelope(api.POST('/api/privacy/requests/{id}/erase', { params: { path: { id: r.id } } })),
    onSuccess: refresh,
  });
  const removed = r.erasure ? Object.values(r.erasure.removed).reduce((a, b) => a + b, 0) : 0;
  const button = (label: string, onClick: () => void, className?: string) => (
    <button type="button" className={className} onClick={onClick}>
      {label}
    </button>
  );
  return (
    <>
      <div className="actions">
        {r.status === 'open' && button(t('privacy.verify'), () => update.mutate('verified'))}
        {!closed && r.type !== 'erasure' && button(t('privacy.complete'), () => update.mutate('completed'))}
        {!closed && button(t('privacy.reject'), () => update.mutate('rejected'))}
        {politician &&
          !r.erasure &&
          button(
            t('privacy.export'),
            () => void download(`/api/privacy/requests/${r.id}/export`, `${r.id}.zip`),
          )}
        {politician &&
          r.type === 'erasure' &&
          !r.erasure &&
          r.status !== 'rejected' &&
          button(
            t('privacy.erase'),
            () => {
              if (window.confirm(t('privacy.confirmErase', { address: r.address }))) erase.mutate();
            },
            'danger',
          )}
      </div>
      {r.erasure && (
        <p className="muted">
          {t('privacy.erased', { rows: n(removed) })}
          {r.erasure.remaining.length > 0 &&
            ` ${t('privacy.remaining', { imports: r.erasure.remaining.map((x) => x.import_id).join(', ') })}`}
        </p>
      )}
      <ErrorNote error={update.error ?? erase.error} />
    </>
  );
}

function NewRequest({ refresh }: { refresh: () => Promise<unknown> }) {
  const { t } = useI18n();
  const [type, setType] = useState<RequestType>('access');
  const [address, setAddress] = useState('');
  const [note, setNote] = useState('');
  const add = useMutation({
    mutationFn: () =>
      envelope(api.POST('/api/privacy/requests', { body: { type, address, ...(note ? { note } : {}) } })),
    onSuccess: () => {
      setAddress('');
      setNote('');
      void refresh();
    },
  });
  return (
    <>
      <form
        className="filters"
        onSubmit={(e) => {
          e.preventDefault();
          add.mutate();
        }}
      >
        <Field label={t('privacy.type')}>
          <select value={type} onChange={(e) => setType(e.target.value as RequestType)}>
            {requestTypes.map((k) => (
              <option key={k} value={k}>
                {t(`privacy.type.${k}`)}
              </option>
            ))}
          </select>
        </Field>
        <Field label={t('privacy.address')}>
          <input required value={address} onChange={(e) => setAddress(e.target.value)} />
        </Field>
        <Field label={t('privacy.note')}>
          <input value={note} onChange={(e) => setNote(e.target.value)} />
        </Field>
        <button className="primary" disabled={add.isPending}>
          {t('privacy.newRequest')}
        </button>
      </form>
      <ErrorNote error={add.error} />
    </>
  );
}

function Breaches() {
  const { t } = useI18n();
  const client = useQueryClient();
  const [page, setPage] = useState(1);
  const list = useQuery({
    queryKey: [...privacyKeys.breaches, page],
    queryFn: () => data(api.GET('/api/privacy/breaches', { params: { query: { page, per_page: 25 } } })),
  });
  const refresh = () => client.invalidateQueries({ queryKey: privacyKeys.breaches });
  return (
    <Section title={t('privacy.breaches')}>
      <Notice>{t('privacy.breachesHint')}</Notice>
      <BreachForm refresh={refresh} />
      <ErrorNote error={list.error} />
      {list.isPending ? (
        <Loading />
      ) : list.data?.data.length === 0 ? (
        <Empty>{t('none')}</Empty>
      ) : (
        <>
          <Table
            stacked
            caption={t('privacy.breaches')}
            head={[
              t('privacy.detected'),
              t('privacy.description'),
              t('privacy.affected'),
              t('privacy.boardDue'),
              t('privacy.boardTold'),
              t('privacy.peopleTold'),
            ]}
          >
            {list.data?.data.map((b) => (
              <BreachRow key={b.id} b={b} refresh={refresh} />
            ))}
          </Table>
          <Pager page={page} lastPage={list.data?.last_page ?? 1} onPage={setPage} />
        </>
      )}
    </Section>
  );
}

/** A breach entered: when it was detected (typed in the office's zone), what happened, how many people. */
function BreachForm({ refresh }: { refresh: () => Promise<unknown> }) {
  const { t, fromLocal, zoneName } = useI18n();
  const [form, setForm] = useState({ detected: '', description: '', affected: '' });
  const record = useMutation({
    mutationFn: () =>
      envelope(
        api.POST('/api/privacy/breaches', {
          body: {
            detected_at: fromLocal(form.detected),
            description: form.description,
            ...(form.affected ? { affected_count: Number(form.affected) } : {}),
          },
        }),
      ),
    onSuccess: () => {
      setForm({ detected: '', description: '', affected: '' });
      void refresh();
    },
  });
  return (
    <>
      <form
        className="filters"
        onSubmit={(e) => {
          e.preventDefault();
          record.mutate();
        }}
      >
        <Field label={t('privacy.detected')} hint={zoneName}>
          <input
            type="datetime-local"
            required
            value={form.detected}
            onChange={(e) => setForm({ ...form, detected: e.target.value })}
          />
        </Field>
        <Field label={t('privacy.description')}>
          <input
            required
            value={form.description}
            onChange={(e) => setForm({ ...form, description: e.target.value })}
          />
        </Field>
        <Field label={t('privacy.affected')}>
          <input
            type="number"
            min={0}
            value={form.affected}
            onChange={(e) => setForm({ ...form, affected: e.target.value })}
          />
        </Field>
        <button className="primary" disabled={record.isPending}>
          {t('privacy.recordBreach')}
        </button>
      </form>
      <ErrorNote error={record.error} />
    </>
  );
}

/** A breach of the register: overdue until the Board is told; each telling recorded with one click. */
function BreachRow({ b, refresh }: { b: Breach; refresh: () => Promise<unknown> }) {
  const { t, d, n } = useI18n();
  const mark = useMutation({
    mutationFn: (what: 'board_notified_at' | 'people_notified_at') =>
      envelope(
        api.PATCH('/api/privacy/breaches/{id}', {
          params: { path: { id: b.id } },
          body: { [what]: new Date().toISOString() },
        }),
      ),
    onSuccess: refresh,
  });
  const told = (at: string | null, what: 'board_notified_at' | 'people_notified_at', label: string) =>
    at ? (
      d(at)
    ) : (
      <button type="button" onClick={() => mark.mutate(what)}>
        {label}
      </button>
    );
  return (
    <tr>
      <td data-label={t('privacy.detected')}>{d(b.detected_at)}</td>
      <td data-label={t('privacy.description')}>{b.description}</td>
      <td data-label={t('privacy.affected')}>{b.affected_count === null ? '—' : n(b.affected_count)}</td>
      <td data-label={t('privacy.boardDue')}>
        {d(b.board_report_due)}{' '}
        {b.overdue && <span className="badge badge-failed">{t('privacy.overdue')}</span>}
      </td>
      <td data-label={t('privacy.boardTold')}>
        {told(b.board_notified_at, 'board_notified_at', t('privacy.markBoard'))}
      </td>
      <td data-label={t('privacy.peopleTold')}>
        {told(b.people_notified_at, 'people_notified_at', t('privacy.markPeople'))}
        <ErrorNote error={mark.error} />
      </td>
    </tr>
  );
}
