import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useEffect, useState } from 'react';
import { Link, useLocation } from 'wouter';
import { api, data, envelope } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { useMe } from '../me.ts';
import { Badge, Empty, ErrorNote, Field, Loading, Notice, Pager, Section, Table } from '../ui.tsx';

/** The filters as the form holds them; `fields.<key>` (and `_min`/`_max`) for custom fields. */
export interface VoterFilters {
  [field: `fields.${string}`]: string;
  search: string;
  constituency: string;
  booth: string;
  ward: string;
  epic_number: string;
  part_number: string;
  serial_from: string;
  serial_to: string;
  page_number: string;
  house_number: string;
  language: string;
  gender: string;
  age_min: string;
  age_max: string;
  tags: string;
  tags_any: string;
  tags_none: string;
  support_level: string;
  household_of: string;
}
export const noFilters: VoterFilters = {
  search: '',
  constituency: '',
  booth: '',
  ward: '',
  epic_number: '',
  part_number: '',
  serial_from: '',
  serial_to: '',
  page_number: '',
  house_number: '',
  language: '',
  gender: '',
  age_min: '',
  age_max: '',
  tags: '',
  tags_any: '',
  tags_none: '',
  support_level: '',
  household_of: '',
};

export const genders = ['male', 'female', 'third_gender'] as const;
export const relations = ['father', 'mother', 'husband', 'wife', 'other'] as const;
const levels = ['1', '2', '3', '4', '5'] as const;

/** Only the filters that are set (the API takes each as given). */
export function setFilters(filters: VoterFilters): Record<string, string> {
  return Object.fromEntries(
    Object.entries(filters).filter(
      (e): e is [string, string] => typeof e[1] === 'string' && e[1].trim() !== '',
    ),
  );
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
  const me = useMe();
  const [draft, setDraft] = useState(value);
  // Open when a filter of its own is set (one handed over by another screen, such as a household).
  const [more, setMore] = useState(() =>
    Object.entries(value).some(
      ([k, v]) => v !== '' && !['search', 'constituency', 'booth', 'ward'].includes(k),
    ),
  );
  const defs = useVoterFields();
  const set = (key: keyof VoterFilters) => (e: { target: { value: string } }) => {
    const next = { ...draft, [key]: e.target.value };
    setDraft(next);
    if (live) onApply(next);
  };
  const text = (key: keyof VoterFilters, type = 'text') => (
    <Field key={key} label={t(`field.${key}` as never)}>
      <input type={type} value={draft[key] ?? ''} onChange={set(key)} />
    </Field>
  );
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
      {text('constituency')}
      {text('booth')}
      {text('ward')}
      <button type="button" aria-expanded={more} onClick={() => setMore(!more)}>
        {t('voters.more')}
      </button>
      {more && (
        <>
          {text('epic_number')}
          {text('part_number', 'number')}
          {text('serial_from', 'number')}
          {text('serial_to', 'number')}
          {text('page_number', 'number')}
          {text('house_number')}
          <Field label={t('field.gender')}>
            <select value={draft.gender} onChange={set('gender')}>
              <option value="">{t('voters.any')}</option>
              {genders.map((g) => (
                <option key={g} value={g}>
                  {t(`gender.${g}`)}
                </option>
              ))}
            </select>
          </Field>
          {text('age_min', 'number')}
          {text('age_max', 'number')}
          <Field label={t('field.tags')} hint={t('voters.tagsHint')}>
            <input value={draft.tags} onChange={set('tags')} />
          </Field>
          {text('tags_any')}
          {text('tags_none')}
          {text('language')}
          {me.user.role !== 'volunteer' && (
            <Field label={t('field.support_level')}>
              <select value={draft.support_level} onChange={set('support_level')}>
                <option value="">{t('voters.any')}</option>
                {levels.map((l) => (
                  <option key={l} value={l}>
                    {t(`support.${l}`)}
                  </option>
                ))}
              </select>
            </Field>
          )}
          <Field label={t('field.household_of')} hint={t('voters.householdHint')}>
            <input type="number" min={1} value={draft.household_of} onChange={set('household_of')} />
          </Field>
          {(defs.data ?? [])
            // A volunteer's filter on a sensitive field is refused (its answer would tell the values).
            .filter((def) => me.user.role !== 'volunteer' || !def.sensitive)
            .map((def) => (
              <CustomFieldFilter key={def.key} def={def} draft={draft} set={set} />
            ))}
        </>
      )}
      {live ? null : <button className="primary">{t('filter.apply')}</button>}
    </form>
  );
}

/**
 * A custom field's filter: its value for text, choice and yes-or-no fields (`fields.<key>`), a from-to range
 * for number and date fields (`fields.<key>_min`, `_max`).
 */
function CustomFieldFilter({
  def,
  draft,
  set,
}: {
  def: FieldDef;
  draft: VoterFilters;
  set(key: keyof VoterFilters): (e: { target: { value: string } }) => void;
}) {
  const { t } = useI18n();
  const key = `fields.${def.key}` as const;
  if (def.type === 'number' || def.type === 'date')
    return (
      <>
        {(['min', 'max'] as const).map((end) => (
          <Field key={end} label={t(`voters.field_${end}`, { label: def.label })}>
            <input type={def.type} value={draft[`${key}_${end}`] ?? ''} onChange={set(`${key}_${end}`)} />
          </Field>
        ))}
      </>
    );
  if (def.type === 'choice' || def.type === 'boolean') {
    const options =
      def.type === 'choice'
        ? (def.choices ?? []).map((c) => [c, c] as const)
        : ([
            ['true', t('yes')],
            ['false', t('no')],
          ] as const);
    return (
      <Field label={def.label}>
        <select value={draft[key] ?? ''} onChange={set(key)}>
          <option value="">{t('voters.any')}</option>
          {options.map(([value, label]) => (
            <option key={value} value={value}>
              {label}
            </option>
          ))}
        </select>
      </Field>
    );
  }
  return (
    <Field label={def.label}>
      <input value={draft[key] ?? ''} onChange={set(key)} />
    </Field>
  );
}

/** Filters another screen handed over in the history entry's state (a voter's "list this household"). */
function handedFilters(): VoterFilters {
  const state: unknown = window.history.state;
  const given =
    state && typeof state === 'object' && 'voterFilters' in state ? (state.voterFilters as object) : {};
  const out: VoterFilters = { ...noFilters };
  for (const [k, v] of Object.entries(given)) if (typeof v === 'string') out[k as keyof VoterFilters] = v;
  return out;
}

/** The roll: filters and search kept in the page (never in the URL), paged. */
export function Voters() {
  const { t, n } = useI18n();
  const me = useMe();
  const [filters, setFiltersState] = useState(handedFilters);
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
      {me.user.role !== 'volunteer' && list.data && list.data.total > 0 && (
        <BulkTag filters={filters} total={list.data.total} />
      )}
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
              t('field.epic_number'),
              `${t('field.part_number')} / ${t('field.serial_number')}`,
              t('field.constituency'),
              t('field.booth'),
              t('field.ward'),
              t('field.tags'),
            ]}
          >
            {list.data?.data.map((v) => (
              <tr key={v.id}>
                <td>
                  <Link href={`/voters/${v.id}`}>{v.name}</Link>
                </td>
                <td>{v.phone}</td>
                <td>{v.epic_number}</td>
                <td>{v.part_number === null ? '' : `${v.part_number} / ${v.serial_number ?? '—'}`}</td>
                <td>{v.constituency}</td>
                <td>{v.booth}</td>
                <td>{v.ward}</td>
                <td>
                  {v.tags.map((tag) => (
                    <span key={tag} className="tag">
                      {tag}
                    </span>
                  ))}
                </td>
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

/** Adds and removes tags on every voter of the filtered list, as a job followed to its end. */
function BulkTag({ filters, total }: { filters: VoterFilters; total: number }) {
  const { t, n } = useI18n();
  const client = useQueryClient();
  const [add, setAdd] = useState('');
  const [remove, setRemove] = useState('');
  const [jobId, setJobId] = useState<number | null>(null);
  const start = useMutation({
    mutationFn: () =>
      data(
        api.POST('/api/voters/tags', {
          body: { add: commaList(add), remove: commaList(remove), filters: setFilters(filters) },
        }),
      ),
    onSuccess: (job) => setJobId((job as unknown as { id: number }).id),
  });
  const job = useQuery({
    queryKey: ['tag-job', jobId],
    queryFn: () => data(api.GET('/api/voters/tags/jobs/{job_id}', { params: { path: { job_id: jobId! } } })),
    enabled: jobId !== null,
    refetchInterval: (q) =>
      q.state.data && ['completed', 'failed'].includes(q.state.data.status) ? false : 1000,
  });
  const status = job.data?.status;
  useEffect(() => {
    if (status === 'completed') void client.invalidateQueries({ queryKey: ['voters'] });
  }, [status, client]);
  return (
    <form
      className="filters"
      aria-label={t('tags.title')}
      onSubmit={(e) => {
        e.preventDefault();
        setJobId(null);
        start.mutate();
      }}
    >
      <Field label={t('tags.add')} hint={t('voters.tagsHint')}>
        <input value={add} onChange={(e) => setAdd(e.target.value)} />
      </Field>
      <Field label={t('tags.remove')}>
        <input value={remove} onChange={(e) => setRemove(e.target.value)} />
      </Field>
      <button disabled={start.isPending || (commaList(add).length === 0 && commaList(remove).length === 0)}>
        {t('tags.apply', { total: n(total) })}
      </button>
      <ErrorNote error={start.error} />
      {job.data && (
        <Notice>
          {status === 'completed'
            ? t('tags.done', {
                changed: n(job.data.changed),
                total: n(job.data.total),
                count: job.data.total,
              })
            : status === 'failed'
              ? t('tags.failed', { error: job.data.error ?? '' })
              : t('tags.running', { changed: n(job.data.changed), total: n(job.data.total) })}
        </Notice>
      )}
    </form>
  );
}

/** "a, b,, c" as ["a", "b", "c"]. */
export function commaList(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
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

/** The voter record's fields the form edits, as text. */
const recordKeys = [
  'epic_number',
  'part_number',
  'serial_number',
  'page_number',
  'house_number',
  'relation_name',
  'relation_type',
  'gender',
  'name_local',
  'language',
  'birth_date',
  'age',
  'support_level',
] as const;
type RecordKey = (typeof recordKeys)[number];
const numberKeys = new Set<RecordKey>(['part_number', 'serial_number', 'page_number', 'age']);

type FieldDef = {
  key: string;
  label: string;
  type: 'text' | 'number' | 'date' | 'choice' | 'boolean';
  choices: string[] | null;
  sensitive: boolean;
};

/** The workspace's custom voter fields (everyone reads them). */
export function useVoterFields() {
  return useQuery({
    queryKey: ['voter-fields'],
    queryFn: () => data(api.GET('/api/voter-fields')) as Promise<FieldDef[]>,
    // Read again on every screen that shows them: a field another member (or the API) added meanwhile shows.
    staleTime: 0,
  });
}

type Shown = string | number | boolean | null | undefined;
const asText = (value: Shown) => (value === null || value === undefined ? '' : String(value));

/** A custom field's value from its input: typed as the field is, '' as null. */
function fieldValue(def: FieldDef, text: string): string | number | boolean | null {
  if (text === '') return null;
  if (def.type === 'number') return Number(text);
  if (def.type === 'boolean') return text === 'true';
  return text;
}

function VoterForm({
  voter,
  onDone,
}: {
  voter?: { id: number; tags?: string[]; fields?: Record<string, Shown> } & Partial<
    Record<keyof VoterFields | RecordKey, Shown>
  >;
  onDone(): void;
}) {
  const { t } = useI18n();
  const client = useQueryClient();
  const defs = useVoterFields();
  const [fields, setFields] = useState<VoterFields>(
    () => Object.fromEntries(voterKeys.map((k) => [k, asText(voter?.[k])])) as VoterFields,
  );
  const [record, setRecord] = useState<Record<RecordKey, string>>(
    () => Object.fromEntries(recordKeys.map((k) => [k, asText(voter?.[k])])) as Record<RecordKey, string>,
  );
  const [tags, setTags] = useState(() => (voter?.tags ?? []).join(', '));
  const [custom, setCustom] = useState<Record<string, string>>(() =>
    Object.fromEntries(Object.entries(voter?.fields ?? {}).map(([k, v]) => [k, asText(v)])),
  );
  const save = useMutation({
    mutationFn: async () => {
      // A new voter: what is filled in. An edit: what changed (a cleared value is null).
      const given = (text: string, was: Shown) => (voter ? text !== asText(was) : text !== '');
      const body: Record<string, unknown> = Object.fromEntries(
        voterKeys
          .filter((k) => given(fields[k], voter?.[k]))
          .map((k) => [k, fields[k] === '' ? null : fields[k]]),
      );
      for (const k of recordKeys) {
        if (k === 'age' && record.birth_date !== '') continue; // a known date wins
        if (given(record[k], voter?.[k])) body[k] = record[k] === '' ? null : record[k];
      }
      if (given(tags, (voter?.tags ?? []).join(', '))) body.tags = commaList(tags);
      const values: Record<string, unknown> = {};
      for (const def of defs.data ?? []) {
        const text = custom[def.key] ?? '';
        if (given(text, voter?.fields?.[def.key])) values[def.key] = fieldValue(def, text);
      }
      if (Object.keys(values).length > 0) body.fields = values;
      if (voter && Object.keys(body).length === 0) return; // nothing changed
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
  const choose = (k: RecordKey, options: readonly string[], label: (o: string) => string) => (
    <select value={record[k]} onChange={(e) => setRecord({ ...record, [k]: e.target.value })}>
      <option value="">—</option>
      {options.map((o) => (
        <option key={o} value={o}>
          {label(o)}
        </option>
      ))}
    </select>
  );
  return (
    <Section title={voter ? t('voters.edit') : t('voters.add')}>
      <form onSubmit={submit} className="form-grid">
        {voterKeys.map((k) => (
          <Field key={k} label={t(`field.${k}`)}>
            <input
              value={fields[k]}
              required={k === 'name' || (k === 'phone' && !voter)}
              type={k === 'email' ? 'email' : k === 'phone' ? 'tel' : 'text'}
              onChange={(e) => setFields({ ...fields, [k]: e.target.value })}
            />
          </Field>
        ))}
        {recordKeys.map((k) => (
          <Field key={k} label={t(`field.${k}`)}>
            {k === 'gender' ? (
              choose(k, genders, (g) => t(`gender.${g as (typeof genders)[number]}`))
            ) : k === 'relation_type' ? (
              choose(k, relations, (r) => t(`relation.${r as (typeof relations)[number]}`))
            ) : k === 'support_level' ? (
              choose(k, levels, (l) => t(`support.${l as (typeof levels)[number]}`))
            ) : (
              <input
                value={record[k]}
                type={numberKeys.has(k) ? 'number' : k === 'birth_date' ? 'date' : 'text'}
                onChange={(e) => setRecord({ ...record, [k]: e.target.value })}
              />
            )}
          </Field>
        ))}
        <Field label={t('field.tags')} hint={t('voters.tagsHint')}>
          <input value={tags} onChange={(e) => setTags(e.target.value)} />
        </Field>
        {(defs.data ?? []).map((def) => (
          <Field key={def.key} label={def.label}>
            {def.type === 'choice' || def.type === 'boolean' ? (
              <select
                value={custom[def.key] ?? ''}
                onChange={(e) => setCustom({ ...custom, [def.key]: e.target.value })}
              >
                <option value="">—</option>
                {(def.type === 'boolean' ? ['true', 'false'] : (def.choices ?? [])).map((c) => (
                  <option key={c} value={c}>
                    {def.type === 'boolean' ? t(c === 'true' ? 'yes' : 'no') : c}
                  </option>
                ))}
              </select>
            ) : (
              <input
                value={custom[def.key] ?? ''}
                type={def.type === 'number' ? 'number' : def.type === 'date' ? 'date' : 'text'}
                step={def.type === 'number' ? 'any' : undefined}
                onChange={(e) => setCustom({ ...custom, [def.key]: e.target.value })}
              />
            )}
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
  const { t, d, code } = useI18n();
  const me = useMe();
  const [, navigate] = useLocation();
  const client = useQueryClient();
  const [editing, setEditing] = useState(false);
  const fieldDefs = useVoterFields();
  const shownRecord = (k: RecordKey, value: Shown): string => {
    if (value === null || value === undefined || value === '') return '—';
    if (k === 'gender') return t(`gender.${value as (typeof genders)[number]}`);
    if (k === 'relation_type') return t(`relation.${value as (typeof relations)[number]}`);
    if (k === 'support_level') return t(`support.${String(value) as (typeof levels)[number]}`);
    return String(value);
  };
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
          {recordKeys
            .filter((k) => k in v)
            .map((k) => (
              <div key={k} className="fact">
                <dt>{t(`field.${k}`)}</dt>
                <dd>{shownRecord(k, (v as unknown as Record<string, Shown>)[k])}</dd>
              </div>
            ))}
          <div className="fact">
            <dt>{t('field.tags')}</dt>
            <dd>
              {v.tags.length === 0
                ? '—'
                : v.tags.map((tag) => (
                    <span key={tag} className="tag">
                      {tag}
                    </span>
                  ))}
            </dd>
          </div>
        </dl>
      </Section>
      {(fieldDefs.data ?? []).some((def) => def.key in v.fields) && (
        <Section title={t('voters.customFields')}>
          <dl className="facts">
            {(fieldDefs.data ?? [])
              .filter((def) => def.key in v.fields)
              .map((def) => (
                <div key={def.key} className="fact">
                  <dt>{def.label}</dt>
                  <dd>
                    {typeof v.fields[def.key] === 'boolean'
                      ? t(v.fields[def.key] ? 'yes' : 'no')
                      : asText(v.fields[def.key])}
                  </dd>
                </div>
              ))}
          </dl>
        </Section>
      )}
      <Section title={t('voters.household')}>
        {v.household.length === 0 ? (
          <Empty>{t('voters.noHousehold')}</Empty>
        ) : (
          <>
            <button
              type="button"
              onClick={() => navigate('/voters', { state: { voterFilters: { household_of: String(v.id) } } })}
            >
              {t('voters.listHousehold')}
            </button>
            <ul className="plain">
              {v.household.map((m) => (
                <li key={m.id}>
                  <Link href={`/voters/${m.id}`}>{m.name}</Link>
                  {/* As the roll gives it (its "Father or Husband Name"), never as a relation to the voter read. */}
                  {m.relation_name ? ` · ${t('voters.relationOf', { name: m.relation_name })}` : ''}
                  {m.age !== null ? ` · ${t('field.age')} ${m.age}` : ''}
                </li>
              ))}
            </ul>
          </>
        )}
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
                  <td>{t(`channel.${m.channel}`)}</td>
                  <td>{m.message}</td>
                  <td>
                    <Badge value={m.status} /> {code(m.error_code)}
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
                  {t(`channel.${c.channel}`)} · {c.last_message_preview}
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
