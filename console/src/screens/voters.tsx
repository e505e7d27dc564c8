import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type ReactElement, useEffect, useState } from 'react';
import { Link } from 'wouter';
import { api, data, envelope } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { useMe } from '../me.ts';
import { Empty, ErrorNote, Field, Loading, Notice, Pager, Table } from '../ui.tsx';
import { commaList, type FieldDef, genders, levels, useVoterFields } from './voter-shared.ts';
import { VoterForm } from './voter-page.tsx';
import type { components } from '../schema.d.ts';
import { keys, queries } from '../queries.ts';

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
  const [draft, setDraft] = useState(value);
  // Open when a filter of its own is set (one handed over by another screen, such as a household).
  const [more, setMore] = useState(() =>
    Object.entries(value).some(
      ([k, v]) => v !== '' && !['search', 'constituency', 'booth', 'ward'].includes(k),
    ),
  );
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
      {more && <MoreFilters draft={draft} set={set} text={text} />}
      {live ? null : <button className="primary">{t('filter.apply')}</button>}
    </form>
  );
}

/** The filters behind "More": the roll's numbers, gender, age, tags, language, support, household, custom fields. */
function MoreFilters({
  draft,
  set,
  text,
}: {
  draft: VoterFilters;
  set: (key: keyof VoterFilters) => (e: { target: { value: string } }) => void;
  text: (key: keyof VoterFilters, type?: string) => ReactElement;
}) {
  const { t } = useI18n();
  const me = useMe();
  const defs = useVoterFields();
  return (
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
    ...queries.voterList({ ...setFilters(filters), page, per_page: 25 }),
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
          <VoterTable voters={list.data?.data ?? []} />
          <Pager page={page} lastPage={list.data?.last_page ?? 1} onPage={setPage} />
        </>
      )}
    </>
  );
}

type VoterRow = components['schemas']['VoterListItem'];

/** The voters of the page: name (to their page), phone, roll numbers, places, tags. */
function VoterTable({ voters }: { voters: VoterRow[] }) {
  const { t } = useI18n();
  return (
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
      {voters.map((v) => (
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
      void client.invalidateQueries({ queryKey: keys.segments });
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
    ...queries.tagJob(jobId),
    refetchInterval: (q) =>
      q.state.data && ['completed', 'failed'].includes(q.state.data.status) ? false : 1000,
  });
  const status = job.data?.status;
  useEffect(() => {
    if (status === 'completed') void client.invalidateQueries({ queryKey: keys.voters });
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
