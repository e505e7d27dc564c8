import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useRef, useState } from 'react';
import { api, data, download, envelope, uploadFile } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { Empty, ErrorNote, Field, Loading, Notice, Pager, Section, Table } from '../ui.tsx';
import { useProviders } from './settings.tsx';

const channels = ['sms', 'whatsapp', 'email', 'ivr'] as const;
type Channel = (typeof channels)[number];

/** Consent: opt-outs (with CSV import and export), election silence periods, templates with their DLT ids. */
export function Consent() {
  const { t } = useI18n();
  return (
    <>
      <h1>{t('nav.consent')}</h1>
      <OptOuts />
      <SilencePeriods />
      <Templates />
    </>
  );
}

function OptOuts() {
  const { t, d, n } = useI18n();
  const client = useQueryClient();
  const [page, setPage] = useState(1);
  const [address, setAddress] = useState('');
  const [channel, setChannel] = useState<Channel | 'all'>('all');
  const file = useRef<HTMLInputElement>(null);
  const list = useQuery({
    queryKey: ['opt-outs', page],
    queryFn: () => data(api.GET('/api/opt-outs', { params: { query: { page, per_page: 25 } } })),
    placeholderData: keepPreviousData,
  });
  const refresh = () => client.invalidateQueries({ queryKey: ['opt-outs'] });
  const add = useMutation({
    mutationFn: () => envelope(api.POST('/api/opt-outs', { body: { address, channel } })),
    onSuccess: () => {
      setAddress('');
      void refresh();
    },
  });
  const remove = useMutation({
    mutationFn: (id: number) => envelope(api.DELETE('/api/opt-outs/{id}', { params: { path: { id } } })),
    onSuccess: refresh,
  });
  const upload = useMutation({
    mutationFn: async () => {
      const chosen = file.current?.files?.[0];
      if (!chosen) throw new Error(t('import.chooseFile'));
      return uploadFile<{ created: number; existing: number; failed: number }>(
        '/api/opt-outs/import',
        chosen,
      );
    },
    onSuccess: refresh,
  });
  return (
    <Section
      title={t('consent.optOuts')}
      actions={
        <button type="button" onClick={() => void download('/api/opt-outs/export', 'opt-outs.csv')}>
          {t('consent.exportCsv')}
        </button>
      }
    >
      <form
        className="filters"
        onSubmit={(e) => {
          e.preventDefault();
          add.mutate();
        }}
      >
        <Field label={t('consent.address')}>
          <input required value={address} onChange={(e) => setAddress(e.target.value)} />
        </Field>
        <Field label={t('field.channel')}>
          <select value={channel} onChange={(e) => setChannel(e.target.value as Channel | 'all')}>
            <option value="all">{t('channel.all')}</option>
            {channels.map((c) => (
              <option key={c} value={c}>
                {t(`channel.${c}`)}
              </option>
            ))}
          </select>
        </Field>
        <button className="primary" disabled={add.isPending}>
          {t('consent.optOut')}
        </button>
      </form>
      <form
        className="filters"
        onSubmit={(e) => {
          e.preventDefault();
          upload.mutate();
        }}
      >
        <Field label={t('consent.importCsv')} hint={t('consent.importHint')}>
          <input ref={file} type="file" accept=".csv,text/csv" required />
        </Field>
        <button disabled={upload.isPending}>{t('import.upload')}</button>
      </form>
      {upload.data && (
        <Notice>
          {t('consent.imported', {
            created: n(upload.data.created),
            existing: n(upload.data.existing),
            failed: n(upload.data.failed),
          })}
        </Notice>
      )}
      <ErrorNote error={list.error ?? add.error ?? remove.error ?? upload.error} />
      {list.isPending ? (
        <Loading />
      ) : list.data?.data.length === 0 ? (
        <Empty>{t('none')}</Empty>
      ) : (
        <>
          <Table
            caption={t('consent.optOuts')}
            head={[t('consent.address'), t('field.channel'), t('field.created'), '']}
          >
            {list.data?.data.map((o) => (
              <tr key={o.id}>
                <td>{o.address}</td>
                <td>{t(`channel.${o.channel}`)}</td>
                <td>{d(o.created_at)}</td>
                <td>
                  <button type="button" onClick={() => remove.mutate(o.id)}>
                    {t('delete')}
                  </button>
                </td>
              </tr>
            ))}
          </Table>
          <Pager page={page} lastPage={list.data?.last_page ?? 1} onPage={setPage} />
        </>
      )}
    </Section>
  );
}

function SilencePeriods() {
  const { t, d } = useI18n();
  const client = useQueryClient();
  const [constituency, setConstituency] = useState('');
  const [startsAt, setStartsAt] = useState('');
  const [endsAt, setEndsAt] = useState('');
  const list = useQuery({
    queryKey: ['silence-periods'],
    queryFn: () => data(api.GET('/api/silence-periods', { params: { query: { per_page: 100 } } })),
  });
  const refresh = () => client.invalidateQueries({ queryKey: ['silence-periods'] });
  const add = useMutation({
    mutationFn: () =>
      envelope(
        api.POST('/api/silence-periods', {
          body: {
            constituency,
            starts_at: new Date(startsAt).toISOString(),
            ends_at: new Date(endsAt).toISOString(),
          },
        }),
      ),
    onSuccess: refresh,
  });
  const remove = useMutation({
    mutationFn: (id: number) =>
      envelope(api.DELETE('/api/silence-periods/{id}', { params: { path: { id } } })),
    onSuccess: refresh,
  });
  return (
    <Section title={t('consent.silence')}>
      <p className="muted">{t('consent.silenceHelp')}</p>
      <form
        className="filters"
        onSubmit={(e) => {
          e.preventDefault();
          add.mutate();
        }}
      >
        <Field label={t('field.constituency')}>
          <input required value={constituency} onChange={(e) => setConstituency(e.target.value)} />
        </Field>
        <Field label={t('consent.starts')}>
          <input
            type="datetime-local"
            required
            value={startsAt}
            onChange={(e) => setStartsAt(e.target.value)}
          />
        </Field>
        <Field label={t('consent.ends')}>
          <input type="datetime-local" required value={endsAt} onChange={(e) => setEndsAt(e.target.value)} />
        </Field>
        <button className="primary" disabled={add.isPending}>
          {t('add')}
        </button>
      </form>
      <ErrorNote error={list.error ?? add.error ?? remove.error} />
      {list.data?.data.length ? (
        <Table
          caption={t('consent.silence')}
          head={[t('field.constituency'), t('consent.starts'), t('consent.ends'), '']}
        >
          {list.data.data.map((s) => (
            <tr key={s.id}>
              <td>{s.constituency}</td>
              <td>{d(s.starts_at)}</td>
              <td>{d(s.ends_at)}</td>
              <td>
                <button type="button" onClick={() => remove.mutate(s.id)}>
                  {t('delete')}
                </button>
              </td>
            </tr>
          ))}
        </Table>
      ) : (
        <Empty>{t('none')}</Empty>
      )}
    </Section>
  );
}

function Templates() {
  const { t } = useI18n();
  const client = useQueryClient();
  const [name, setName] = useState('');
  const [channel, setChannel] = useState<Channel>('sms');
  const [body, setBody] = useState('');
  const [language, setLanguage] = useState('en');
  const [dlt, setDlt] = useState('');
  const [sender, setSender] = useState('');
  const providers = useProviders();
  const keeping = (providers.data ?? []).filter((p) => p.templates);
  const [ids, setIds] = useState<Record<string, string>>({});
  const list = useQuery({
    queryKey: ['templates'],
    queryFn: () => data(api.GET('/api/templates', { params: { query: { per_page: 100 } } })),
  });
  const refresh = () => client.invalidateQueries({ queryKey: ['templates'] });
  const add = useMutation({
    mutationFn: () =>
      envelope(
        api.POST('/api/templates', {
          body: {
            name,
            channel,
            body,
            language,
            ...(dlt ? { dlt_template_id: dlt } : {}),
            ...(sender ? { sender_id: sender } : {}),
            ...(Object.values(ids).some(Boolean)
              ? { provider_template_ids: Object.fromEntries(Object.entries(ids).filter(([, v]) => v)) }
              : {}),
          },
        }),
      ),
    onSuccess: () => {
      setName('');
      setBody('');
      void refresh();
    },
  });
  const remove = useMutation({
    mutationFn: (id: string) => envelope(api.DELETE('/api/templates/{id}', { params: { path: { id } } })),
    onSuccess: refresh,
  });
  return (
    <Section title={t('consent.templates')}>
      <form
        className="form-grid"
        onSubmit={(e) => {
          e.preventDefault();
          add.mutate();
        }}
      >
        <Field label={t('field.name')}>
          <input required value={name} onChange={(e) => setName(e.target.value)} />
        </Field>
        <Field label={t('field.channel')}>
          <select value={channel} onChange={(e) => setChannel(e.target.value as Channel)}>
            {channels.map((c) => (
              <option key={c} value={c}>
                {t(`channel.${c}`)}
              </option>
            ))}
          </select>
        </Field>
        <Field label={t('consent.language')}>
          <input value={language} onChange={(e) => setLanguage(e.target.value)} />
        </Field>
        <Field label={t('consent.body')} hint={t('consent.bodyHint')}>
          <textarea required rows={3} value={body} onChange={(e) => setBody(e.target.value)} />
        </Field>
        <Field label={t('consent.dlt')}>
          <input value={dlt} onChange={(e) => setDlt(e.target.value)} />
        </Field>
        <Field label={t('consent.sender')}>
          <input value={sender} onChange={(e) => setSender(e.target.value)} />
        </Field>
        {keeping.map((p) => (
          <Field
            key={p.name}
            label={t('consent.providerTemplate', { provider: p.label })}
            hint={p.templates?.id_label}
          >
            <input value={ids[p.name] ?? ''} onChange={(e) => setIds({ ...ids, [p.name]: e.target.value })} />
          </Field>
        ))}
        <div className="actions">
          <button className="primary" disabled={add.isPending}>
            {t('add')}
          </button>
        </div>
      </form>
      <ErrorNote error={list.error ?? add.error ?? remove.error} />
      {list.data?.data.length ? (
        <Table
          caption={t('consent.templates')}
          head={[t('field.name'), t('field.channel'), t('consent.body'), t('consent.dlt'), '']}
        >
          {list.data.data.map((tpl) => (
            <tr key={tpl.id}>
              <td>{tpl.name}</td>
              <td>{t(`channel.${tpl.channel}`)}</td>
              <td>{tpl.body}</td>
              <td>{tpl.dlt_template_id}</td>
              <td>
                <button type="button" onClick={() => remove.mutate(tpl.id)}>
                  {t('delete')}
                </button>
              </td>
            </tr>
          ))}
        </Table>
      ) : (
        <Empty>{t('none')}</Empty>
      )}
    </Section>
  );
}
