import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useRef, useState } from 'react';
import { api, download, envelope, uploadFile } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { Empty, ErrorNote, Field, Loading, Notice, Pager, Section, Table } from '../ui.tsx';
import type { components } from '../schema.d.ts';
import { keys, queries, useProviders } from '../queries.ts';

const channels = ['sms', 'whatsapp', 'email', 'ivr'] as const;
type Channel = (typeof channels)[number];
const categories = ['promotional', 'service', 'transactional'] as const;
type Category = (typeof categories)[number];

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
  const { t, d } = useI18n();
  const client = useQueryClient();
  const [page, setPage] = useState(1);
  const list = useQuery(queries.optOuts(page));
  const refresh = () => client.invalidateQueries({ queryKey: keys.optOuts });
  const remove = useMutation({
    mutationFn: (id: number) => envelope(api.DELETE('/api/opt-outs/{id}', { params: { path: { id } } })),
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
      <AddOptOut refresh={refresh} />
      <ImportOptOuts refresh={refresh} />
      <ErrorNote error={list.error ?? remove.error} />
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

/** One address opted out, of one channel or all. */
function AddOptOut({ refresh }: { refresh: () => Promise<unknown> }) {
  const { t } = useI18n();
  const [address, setAddress] = useState('');
  const [channel, setChannel] = useState<Channel | 'all'>('all');
  const add = useMutation({
    mutationFn: () => envelope(api.POST('/api/opt-outs', { body: { address, channel } })),
    onSuccess: () => {
      setAddress('');
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
      <ErrorNote error={add.error} />
    </>
  );
}

/** A CSV of opt-outs (an export imports back). */
function ImportOptOuts({ refresh }: { refresh: () => Promise<unknown> }) {
  const { t, n } = useI18n();
  const file = useRef<HTMLInputElement>(null);
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
    <>
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
      <ErrorNote error={upload.error} />
    </>
  );
}

function SilencePeriods() {
  const { t, d } = useI18n();
  const client = useQueryClient();
  const list = useQuery(queries.silencePeriods());
  const refresh = () => client.invalidateQueries({ queryKey: keys.silencePeriods });
  const remove = useMutation({
    mutationFn: (id: number) =>
      envelope(api.DELETE('/api/silence-periods/{id}', { params: { path: { id } } })),
    onSuccess: refresh,
  });
  return (
    <Section title={t('consent.silence')}>
      <p className="muted">{t('consent.silenceHelp')}</p>
      <AddSilencePeriod refresh={refresh} />
      <ErrorNote error={list.error ?? remove.error} />
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

/** A silence period: a constituency, and its start and end typed in the office's zone. */
function AddSilencePeriod({ refresh }: { refresh: () => Promise<unknown> }) {
  const { t, fromLocal, zoneName } = useI18n();
  const [constituency, setConstituency] = useState('');
  const [startsAt, setStartsAt] = useState('');
  const [endsAt, setEndsAt] = useState('');
  const add = useMutation({
    mutationFn: () =>
      envelope(
        api.POST('/api/silence-periods', {
          body: {
            constituency,
            // Typed in the workspace's zone, whatever the device's (fifth part): sent as UTC.
            starts_at: fromLocal(startsAt),
            ends_at: fromLocal(endsAt),
          },
        }),
      ),
    onSuccess: refresh,
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
        <Field label={t('field.constituency')}>
          <input required value={constituency} onChange={(e) => setConstituency(e.target.value)} />
        </Field>
        <Field label={t('consent.starts')} hint={t('time.inZone', { zone: zoneName })}>
          <input
            type="datetime-local"
            required
            value={startsAt}
            onChange={(e) => setStartsAt(e.target.value)}
          />
        </Field>
        <Field label={t('consent.ends')} hint={t('time.inZone', { zone: zoneName })}>
          <input type="datetime-local" required value={endsAt} onChange={(e) => setEndsAt(e.target.value)} />
        </Field>
        <button className="primary" disabled={add.isPending}>
          {t('add')}
        </button>
      </form>
      <ErrorNote error={add.error} />
    </>
  );
}

/** What the template form holds. */
const blankTemplate = {
  name: '',
  channel: 'sms' as Channel,
  body: '',
  language: 'en',
  category: 'promotional' as Category,
  subject: '',
  dlt: '',
  sender: '',
  ids: {} as Record<string, string>,
};
type TemplateForm = typeof blankTemplate;
type TemplateRow = components['schemas']['Template'];

/** A template as the form holds it. */
function formOf(tpl: TemplateRow): TemplateForm {
  return {
    name: tpl.name,
    channel: tpl.channel,
    body: tpl.body,
    language: tpl.language,
    category: tpl.category,
    subject: tpl.subject ?? '',
    dlt: tpl.dlt_template_id ?? '',
    sender: tpl.sender_id ?? '',
    ids: { ...tpl.provider_template_ids },
  };
}

/** The form as the API takes it. */
function bodyOf(form: TemplateForm) {
  const ids = Object.fromEntries(Object.entries(form.ids).filter(([, v]) => v));
  return {
    name: form.name,
    channel: form.channel,
    body: form.body,
    language: form.language,
    category: form.category,
    dlt_template_id: form.dlt || null,
    sender_id: form.sender || null,
    subject: form.channel === 'email' && form.subject ? form.subject : null,
    provider_template_ids: Object.keys(ids).length > 0 ? ids : null,
  };
}

function Templates() {
  const { t } = useI18n();
  const client = useQueryClient();
  const [form, setForm] = useState(blankTemplate);
  const set = (change: Partial<TemplateForm>) => setForm({ ...form, ...change });
  /** The template being edited (the form saves it), or null (the form adds one). */
  const [editing, setEditing] = useState<string | null>(null);
  const list = useQuery(queries.templates());
  const refresh = () => client.invalidateQueries({ queryKey: keys.templates });
  const add = useMutation({
    mutationFn: () =>
      envelope(
        editing
          ? api.PATCH('/api/templates/{id}', { params: { path: { id: editing } }, body: bodyOf(form) })
          : api.POST('/api/templates', { body: bodyOf(form) }),
      ),
    onSuccess: () => {
      // Nothing of this template stays in the form for the next one (its provider ids included).
      setForm(blankTemplate);
      setEditing(null);
      void refresh();
    },
  });
  const remove = useMutation({
    mutationFn: (id: string) => envelope(api.DELETE('/api/templates/{id}', { params: { path: { id } } })),
    onSuccess: refresh,
  });
  const edit = (tpl: TemplateRow) => {
    setEditing(tpl.id);
    setForm(formOf(tpl));
  };
  return (
    <Section title={t('consent.templates')}>
      <form
        className="form-grid"
        onSubmit={(e) => {
          e.preventDefault();
          add.mutate();
        }}
      >
        {editing && <h3>{t('consent.editing', { name: form.name })}</h3>}
        <TemplateFields form={form} set={set} />
        <div className="actions">
          <button className="primary" disabled={add.isPending}>
            {editing ? t('save') : t('add')}
          </button>
          {editing && (
            <button
              type="button"
              onClick={() => {
                setEditing(null);
                setForm(blankTemplate);
              }}
            >
              {t('cancel')}
            </button>
          )}
        </div>
      </form>
      <ErrorNote error={list.error ?? add.error ?? remove.error} />
      <TemplatesTable rows={list.data?.data ?? []} edit={edit} remove={(id) => remove.mutate(id)} />
    </Section>
  );
}

/** The templates, each with Edit and Delete. */
function TemplatesTable({
  rows,
  edit,
  remove,
}: {
  rows: TemplateRow[];
  edit: (tpl: TemplateRow) => void;
  remove: (id: string) => void;
}) {
  const { t } = useI18n();
  return (
    <>
      {rows.length ? (
        <Table
          caption={t('consent.templates')}
          head={[t('field.name'), t('field.channel'), t('consent.body'), t('consent.dlt'), '']}
        >
          {rows.map((tpl) => (
            <tr key={tpl.id}>
              <td>{tpl.name}</td>
              <td>{t(`channel.${tpl.channel}`)}</td>
              <td>{tpl.body}</td>
              <td>{tpl.dlt_template_id}</td>
              <td>
                <button type="button" onClick={() => edit(tpl)}>
                  {t('edit')}
                </button>{' '}
                <button type="button" onClick={() => remove(tpl.id)}>
                  {t('delete')}
                </button>
              </td>
            </tr>
          ))}
        </Table>
      ) : (
        <Empty>{t('none')}</Empty>
      )}
    </>
  );
}

/** A template's name, channel, category, language, subject, text, DLT ids and each gateway's own id. */
function TemplateFields({ form, set }: { form: TemplateForm; set: (change: Partial<TemplateForm>) => void }) {
  const { t, lang } = useI18n();
  const providers = useProviders();
  const keeping = (providers.data ?? []).filter((p) => p.templates);
  return (
    <>
      <Field label={t('field.name')}>
        <input required value={form.name} onChange={(e) => set({ name: e.target.value })} />
      </Field>
      <Field label={t('field.channel')}>
        <select value={form.channel} onChange={(e) => set({ channel: e.target.value as Channel })}>
          {channels.map((c) => (
            <option key={c} value={c}>
              {t(`channel.${c}`)}
            </option>
          ))}
        </select>
      </Field>
      <Field label={t('consent.category')} hint={t('consent.categoryHint')}>
        <select value={form.category} onChange={(e) => set({ category: e.target.value as Category })}>
          {categories.map((c) => (
            <option key={c} value={c}>
              {t(`category.${c}`)}
            </option>
          ))}
        </select>
      </Field>
      <Field label={t('consent.language')}>
        <input value={form.language} onChange={(e) => set({ language: e.target.value })} />
      </Field>
      {form.channel === 'email' && (
        <Field label={t('compose.subject')}>
          <input value={form.subject} onChange={(e) => set({ subject: e.target.value })} />
        </Field>
      )}
      <Field label={t('consent.body')} hint={t('consent.bodyHint')}>
        <textarea required rows={3} value={form.body} onChange={(e) => set({ body: e.target.value })} />
      </Field>
      <Field label={t('consent.dlt')}>
        <input value={form.dlt} onChange={(e) => set({ dlt: e.target.value })} />
      </Field>
      <Field label={t('consent.sender')}>
        <input value={form.sender} onChange={(e) => set({ sender: e.target.value })} />
      </Field>
      {keeping.map((p) => (
        <Field
          key={p.name}
          label={t('consent.providerTemplate', { provider: p.label })}
          hint={lang === 'hi' ? p.templates?.id_label_hi : p.templates?.id_label}
        >
          <input
            value={form.ids[p.name] ?? ''}
            onChange={(e) => set({ ids: { ...form.ids, [p.name]: e.target.value } })}
          />
        </Field>
      ))}
    </>
  );
}
