import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link, useLocation } from 'wouter';
import { api, data, envelope } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { useMe } from '../me.ts';
import { Badge, Empty, ErrorNote, Field, Loading, Notice, Pager, Section, Table } from '../ui.tsx';

export interface VoterFilters {
  search: string;
  constituency: string;
  booth: string;
  ward: string;
}
export const noFilters: VoterFilters = { search: '', constituency: '', booth: '', ward: '' };

/** Only the filters that are set (the API takes each as given). */
export function setFilters(filters: VoterFilters): Partial<VoterFilters> {
  return Object.fromEntries(
    Object.entries(filters).filter(([, v]) => v.trim() !== ''),
  ) as Partial<VoterFilters>;
}

/**
 * The voter filters. `live`: every change is applied as it is typed (the export reads the form as it stands);
 * otherwise they apply with the button.
 */
export function FilterForm({
  value,
  onApply,
  live = false,
}: {
  value: VoterFilters;
  onApply(next: VoterFilters): void;
  live?: boolean;
}) {
  const { t } = useI18n();
  const [draft, setDraft] = useState(value);
  const set = (key: keyof VoterFilters) => (e: { target: { value: string } }) => {
    const next = { ...draft, [key]: e.target.value };
    setDraft(next);
    if (live) onApply(next);
  };
  return (
    <form
      className="filters"
      role="search"
      onSubmit={(e) => {
        e.preventDefault();
        onApply(draft);
      }}
    >
      <Field label={t('field.search')}>
        <input type="search" value={draft.search} onChange={set('search')} />
      </Field>
      <Field label={t('field.constituency')}>
        <input value={draft.constituency} onChange={set('constituency')} />
      </Field>
      <Field label={t('field.booth')}>
        <input value={draft.booth} onChange={set('booth')} />
      </Field>
      <Field label={t('field.ward')}>
        <input value={draft.ward} onChange={set('ward')} />
      </Field>
      {live ? null : <button className="primary">{t('filter.apply')}</button>}
    </form>
  );
}

/** The roll: filters and search kept in the page (never in the URL), paged. */
export function Voters() {
  const { t, n } = useI18n();
  const me = useMe();
  const [filters, setFiltersState] = useState(noFilters);
  const [page, setPage] = useState(1);
  const [adding, setAdding] = useState(false);
  const list = useQuery({
    queryKey: ['voters', filters, page],
    queryFn: () =>
      data(api.GET('/api/voters', { params: { query: { ...setFilters(filters), page, per_page: 25 } } })),
    placeholderData: keepPreviousData,
  });
  return (
    <>
      <div className="page-head">
        <h1>{t('nav.voters')}</h1>
        {me.user.role !== 'volunteer' && (
          <button type="button" onClick={() => setAdding(!adding)} aria-expanded={adding}>
            {t('voters.add')}
          </button>
        )}
      </div>
      {adding && <VoterForm onDone={() => setAdding(false)} />}
      <FilterForm
        value={filters}
        onApply={(next) => {
          setFiltersState(next);
          setPage(1);
        }}
      />
      {me.user.role !== 'volunteer' && <SaveSegment filters={filters} />}
      <ErrorNote error={list.error} />
      {list.isPending ? (
        <Loading />
      ) : list.data && list.data.data.length === 0 ? (
        <Empty>{t('voters.none')}</Empty>
      ) : (
        <>
          <p className="muted" role="status">
            {t('voters.count', { total: n(list.data?.total ?? 0), count: list.data?.total ?? 0 })}
          </p>
          <Table
            caption={t('nav.voters')}
            head={[
              t('field.name'),
              t('field.phone'),
              t('field.constituency'),
              t('field.booth'),
              t('field.ward'),
            ]}
          >
            {list.data?.data.map((v) => (
              <tr key={v.id}>
                <td>
                  <Link href={`/voters/${v.id}`}>{v.name}</Link>
                </td>
                <td>{v.phone}</td>
                <td>{v.constituency}</td>
                <td>{v.booth}</td>
                <td>{v.ward}</td>
              </tr>
            ))}
          </Table>
          <Pager page={page} lastPage={list.data?.last_page ?? 1} onPage={setPage} />
        </>
      )}
    </>
  );
}

/** Saves the filters in force as a named segment, which campaigns send to. */
function SaveSegment({ filters }: { filters: VoterFilters }) {
  const { t } = useI18n();
  const client = useQueryClient();
  const [name, setName] = useState('');
  const save = useMutation({
    mutationFn: () => envelope(api.POST('/api/segments', { body: { name, filters: setFilters(filters) } })),
    onSuccess: () => {
      setName('');
      void client.invalidateQueries({ queryKey: ['segments'] });
    },
  });
  return (
    <form
      className="filters"
      onSubmit={(e) => {
        e.preventDefault();
        save.mutate();
      }}
    >
      <Field label={t('segments.name')} hint={t('segments.hint')}>
        <input required value={name} onChange={(e) => setName(e.target.value)} />
      </Field>
      <button disabled={save.isPending}>{t('segments.save')}</button>
      <ErrorNote error={save.error} />
      {save.isSuccess && <Notice>{t('segments.saved', { name: save.data.data.name })}</Notice>}
    </form>
  );
}

type VoterFields = {
  name: string;
  phone: string;
  email: string;
  constituency: string;
  booth: string;
  ward: string;
  address: string;
};
const voterKeys = ['name', 'phone', 'email', 'constituency', 'booth', 'ward', 'address'] as const;

function VoterForm({
  voter,
  onDone,
}: {
  voter?: { id: number } & Partial<Record<keyof VoterFields, string | null>>;
  onDone(): void;
}) {
  const { t } = useI18n();
  const client = useQueryClient();
  const [fields, setFields] = useState<VoterFields>(
    () => Object.fromEntries(voterKeys.map((k) => [k, voter?.[k] ?? ''])) as VoterFields,
  );
  const save = useMutation({
    mutationFn: async () => {
      const body = Object.fromEntries(
        voterKeys.filter((k) => fields[k] !== '' || voter).map((k) => [k, fields[k]]),
      );
      if (voter) await envelope(api.PUT('/api/voters/{id}', { params: { path: { id: voter.id } }, body }));
      else await envelope(api.POST('/api/voters', { body: body as { name: string; phone: string } }));
    },
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: ['voters'] });
      void client.invalidateQueries({ queryKey: ['voter'] });
      onDone();
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    save.mutate();
  };
  return (
    <Section title={voter ? t('voters.edit') : t('voters.add')}>
      <form onSubmit={submit} className="form-grid">
        {voterKeys.map((k) => (
          <Field key={k} label={t(`field.${k}`)}>
            <input
              value={fields[k]}
              required={k === 'name' || k === 'phone'}
              type={k === 'email' ? 'email' : k === 'phone' ? 'tel' : 'text'}
              onChange={(e) => setFields({ ...fields, [k]: e.target.value })}
            />
          </Field>
        ))}
        <ErrorNote error={save.error} />
        <div className="actions">
          <button className="primary" disabled={save.isPending}>
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

/** One voter: their record, messages to them, their conversations and grievances; edit and delete. */
export function VoterPage({ id }: { id: number }) {
  const { t, d } = useI18n();
  const me = useMe();
  const [, navigate] = useLocation();
  const client = useQueryClient();
  const [editing, setEditing] = useState(false);
  const voter = useQuery({
    queryKey: ['voter', id],
    queryFn: () => data(api.GET('/api/voters/{id}', { params: { path: { id } } })),
  });
  const phone = voter.data?.phone;
  const staff = me.user.role !== 'volunteer';
  const messages = useQuery({
    queryKey: ['voter-messages', phone],
    queryFn: () =>
      data(api.GET('/api/messages/history', { params: { query: { to: phone!, per_page: 20 } } })),
    enabled: staff && !!phone,
  });
  const conversations = useQuery({
    queryKey: ['conversations', 'voter', phone],
    queryFn: () =>
      data(api.GET('/api/conversations', { params: { query: { search: phone!, per_page: 20 } } })),
    enabled: !!phone,
  });
  const grievances = useQuery({
    queryKey: ['grievances', 'voter', phone],
    queryFn: () => data(api.GET('/api/grievances', { params: { query: { search: phone!, per_page: 20 } } })),
    enabled: staff && !!phone,
  });
  const remove = useMutation({
    mutationFn: () => envelope(api.DELETE('/api/voters/{id}', { params: { path: { id } } })),
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: ['voters'] });
      navigate('/voters');
    },
  });
  if (voter.isPending) return <Loading />;
  if (!voter.data) return <ErrorNote error={voter.error} />;
  const v = voter.data;
  return (
    <>
      <div className="page-head">
        <h1>{v.name}</h1>
        {staff && (
          <div className="actions">
            <button type="button" onClick={() => setEditing(!editing)} aria-expanded={editing}>
              {t('edit')}
            </button>
            <button
              type="button"
              className="danger"
              onClick={() => {
                if (window.confirm(t('voters.confirmDelete', { name: v.name }))) remove.mutate();
              }}
            >
              {t('delete')}
            </button>
          </div>
        )}
      </div>
      <ErrorNote error={remove.error} />
      {editing && <VoterForm voter={v} onDone={() => setEditing(false)} />}
      <Section title={t('voters.record')}>
        <dl className="facts">
          {voterKeys.map((k) => (
            <div key={k} className="fact">
              <dt>{t(`field.${k}`)}</dt>
              <dd>{v[k] ?? '—'}</dd>
            </div>
          ))}
        </dl>
      </Section>
      {staff && (
        <Section title={t('voters.messages')}>
          {messages.data?.data.length ? (
            <Table
              caption={t('voters.messages')}
              head={[t('field.channel'), t('field.message'), t('field.status'), t('field.created')]}
            >
              {messages.data.data.map((m) => (
                <tr key={m.id}>
                  <td>{m.channel}</td>
                  <td>{m.message}</td>
                  <td>
                    <Badge value={m.status} /> {m.error_code}
                  </td>
                  <td>{d(m.created_at)}</td>
                </tr>
              ))}
            </Table>
          ) : (
            <Empty>{t('none')}</Empty>
          )}
        </Section>
      )}
      <Section title={t('nav.inbox')}>
        {conversations.data?.data.length ? (
          <ul className="plain">
            {conversations.data.data.map((c) => (
              <li key={c.id}>
                <Link href={`/inbox/${c.id}`}>
                  {c.channel} · {c.last_message_preview}
                </Link>{' '}
                <Badge value={c.status} />
              </li>
            ))}
          </ul>
        ) : (
          <Empty>{t('none')}</Empty>
        )}
      </Section>
      {staff && (
        <Section title={t('nav.grievances')}>
          {grievances.data?.data.length ? (
            <ul className="plain">
              {grievances.data.data.map((g) => (
                <li key={g.id}>
                  {g.title} <Badge value={g.status} />
                </li>
              ))}
            </ul>
          ) : (
            <Empty>{t('none')}</Empty>
          )}
        </Section>
      )}
      {!staff && <Notice>{t('voters.readOnly')}</Notice>}
    </>
  );
}
