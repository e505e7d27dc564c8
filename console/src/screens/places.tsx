import { useMutation, useQueries, useQuery, useQueryClient } from '@tanstack/react-query';
import { useId, useState } from 'react';
import { api, envelope } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import type { components } from '../schema.d.ts';
import { Empty, ErrorNote, Field, Loading, Notice, Pager, Section, Table } from '../ui.tsx';
import { keys, queries } from '../queries.ts';

type Place = components['schemas']['Place'];
type Kind = Place['kind'];
const kinds: Kind[] = ['constituency', 'ward', 'booth'];

/** Aliases as typed: one per comma or line, empty ones left out. */
const aliasList = (text: string) =>
  text
    .split(/[,\n]/)
    .map((a) => a.trim())
    .filter(Boolean);

/**
 * Places (politicians and managers): constituencies, wards and booths with the other names the roll uses for
 * them (another script, a number, a common spelling), so that each is one place in filters, segments,
 * silence periods and coverage.
 */
export function Places() {
  const { t } = useI18n();
  const [kind, setKind] = useState<Kind>('constituency');
  const [page, setPage] = useState(1);
  const list = useQuery(queries.places(kind, page));
  const [editing, setEditing] = useState<Place | null>(null);
  return (
    <>
      <h1>{t('nav.places')}</h1>
      <p className="muted">{t('places.help')}</p>
      <div className="tabs" role="group" aria-label={t('places.kind')}>
        {kinds.map((k) => (
          <button
            key={k}
            type="button"
            aria-pressed={kind === k}
            onClick={() => {
              setKind(k);
              setPage(1);
              setEditing(null);
            }}
          >
            {t(`places.kind.${k}`)}
          </button>
        ))}
      </div>
      <PlaceForm kind={kind} editing={editing} onDone={() => setEditing(null)} />
      <Section title={t(`places.kind.${kind}`)}>
        <ErrorNote error={list.error} />
        {list.isPending ? (
          <Loading />
        ) : !list.data?.data.length ? (
          <Empty>{t('none')}</Empty>
        ) : (
          <>
            <Table
              caption={t(`places.kind.${kind}`)}
              head={[t('places.name'), t('places.aliases'), t('places.code'), '']}
            >
              {list.data.data.map((p) => (
                <tr key={p.id}>
                  <td>{p.name}</td>
                  <td>{p.aliases.join(', ')}</td>
                  <td>{p.code ?? ''}</td>
                  <td>
                    <button type="button" onClick={() => setEditing(p)}>
                      {t('edit')}
                    </button>
                  </td>
                </tr>
              ))}
            </Table>
            <Pager page={page} lastPage={list.data.last_page} onPage={setPage} />
          </>
        )}
      </Section>
    </>
  );
}

/** Adds a place of the kind shown, or edits the one chosen (its aliases replaced by the list given). */
function PlaceForm({ kind, editing, onDone }: { kind: Kind; editing: Place | null; onDone(): void }) {
  const { t } = useI18n();
  const client = useQueryClient();
  const [form, setForm] = useState({ name: '', aliases: '', code: '' });
  const [shown, setShown] = useState<number | null>(null);
  // A newly chosen place fills the form once.
  if (editing && shown !== editing.id) {
    setShown(editing.id);
    setForm({ name: editing.name, aliases: editing.aliases.join(', '), code: editing.code ?? '' });
  }
  const reset = () => {
    setShown(null);
    setForm({ name: '', aliases: '', code: '' });
    onDone();
    void client.invalidateQueries({ queryKey: keys.places });
  };
  const save = useMutation({
    mutationFn: () => {
      const body = { name: form.name, aliases: aliasList(form.aliases), code: form.code.trim() || null };
      return editing
        ? envelope(api.PATCH('/api/places/{id}', { params: { path: { id: editing.id } }, body }))
        : envelope(api.POST('/api/places', { body: { kind, ...body } }));
    },
    onSuccess: reset,
  });
  const remove = useMutation({
    mutationFn: (id: number) => envelope(api.DELETE('/api/places/{id}', { params: { path: { id } } })),
    onSuccess: reset,
  });
  return (
    <Section title={editing ? t('places.edit', { name: editing.name }) : t('places.add')}>
      <form
        className="filters"
        onSubmit={(e) => {
          e.preventDefault();
          save.mutate();
        }}
      >
        <Field label={t('places.name')}>
          <input required value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} />
        </Field>
        <Field label={t('places.aliases')} hint={t('places.aliasesHint')}>
          <input value={form.aliases} onChange={(e) => setForm({ ...form, aliases: e.target.value })} />
        </Field>
        <Field label={t('places.code')}>
          <input value={form.code} onChange={(e) => setForm({ ...form, code: e.target.value })} />
        </Field>
        <button className="primary" disabled={save.isPending}>
          {editing ? t('save') : t('add')}
        </button>
        {editing && (
          <>
            <button type="button" onClick={reset}>
              {t('cancel')}
            </button>
            <button type="button" className="danger" onClick={() => remove.mutate(editing.id)}>
              {t('delete')}
            </button>
          </>
        )}
      </form>
      <ErrorNote error={save.error ?? remove.error} />
    </Section>
  );
}

/** A place name as the service compares it (lib/place.ts): NFKC, invisible characters dropped, spaces collapsed, case folded. */
const placeKey = (value: string) =>
  value
    .normalize('NFKC')
    .replace(/\p{Cf}/gu, '')
    .replace(/[\s\p{Zs}]+/gu, ' ')
    .trim()
    .toLowerCase();

/**
 * An import's values that match no place, each with "Add as a place" and "Add as an alias of…" (one click
 * after choosing the place). A value that matches a place now (added here, or since the import) leaves the list.
 */
export function UnknownPlaces({ unknown }: { unknown: Partial<Record<Kind, string[]>> }) {
  const { t } = useI18n();
  const present = kinds.filter((kind) => (unknown[kind] ?? []).length > 0);
  const places = useQueries({
    queries: present.map((kind) => queries.allPlaces(kind)),
  });
  const placesOf = (kind: Kind) => places[present.indexOf(kind)]?.data?.data ?? [];
  const known = (kind: Kind, value: string) =>
    placesOf(kind).some((p) => [p.name, ...p.aliases].some((name) => placeKey(name) === placeKey(value)));
  if (present.length === 0) return null;
  const left = present.flatMap((kind) =>
    (unknown[kind] ?? []).filter((value) => !known(kind, value)).map((value) => ({ kind, value })),
  );
  return (
    <div className="unknown-places" data-testid="unknown-places">
      <h3>{t('places.unknown')}</h3>
      {left.length === 0 ? (
        <Notice>{t('places.unknownDone')}</Notice>
      ) : (
        <>
          <p className="muted">{t('places.unknownHelp')}</p>
          {left.length > 1 && <AddAll left={left} />}
          <Table caption={t('places.unknown')} head={[t('places.kind'), t('places.value'), '']}>
            {[...left]
              .sort((a, b) => byNumber.compare(a.value, b.value))
              .map((e) => (
                <UnknownRow
                  key={`${e.kind}:${e.value}`}
                  kind={e.kind}
                  value={e.value}
                  places={placesOf(e.kind)}
                />
              ))}
          </Table>
        </>
      )}
    </div>
  );
}

/** Names compared as people count: Ward 2 before Ward 10. */
const byNumber = new Intl.Collator(undefined, { numeric: true, sensitivity: 'base' });

/** Every unknown place of a file added as a place at once (18 unknown wards are one click, not 18). */
function AddAll({ left }: { left: Array<{ kind: Kind; value: string }> }) {
  const { t, n } = useI18n();
  const client = useQueryClient();
  const addAll = useMutation({
    mutationFn: async () => {
      for (const { kind, value } of left)
        await envelope(api.POST('/api/places', { body: { kind, name: value } }));
    },
    onSettled: () => void client.invalidateQueries({ queryKey: keys.places }),
  });
  return (
    <>
      <button type="button" disabled={addAll.isPending} onClick={() => addAll.mutate()}>
        {t('places.addAll', { count: n(left.length) })}
      </button>
      <ErrorNote error={addAll.error} />
    </>
  );
}

function UnknownRow({ kind, value, places }: { kind: Kind; value: string; places: Place[] }) {
  const { t } = useI18n();
  const client = useQueryClient();
  const [target, setTarget] = useState('');
  const id = useId();
  const finish = () => void client.invalidateQueries({ queryKey: keys.places });
  const addPlace = useMutation({
    mutationFn: () => envelope(api.POST('/api/places', { body: { kind, name: value } })),
    onSuccess: finish,
  });
  const addAlias = useMutation({
    mutationFn: () => {
      const place = places.find((p) => String(p.id) === target);
      if (!place) throw new Error(t('places.choose'));
      return envelope(
        api.PATCH('/api/places/{id}', {
          params: { path: { id: place.id } },
          body: { aliases: [...place.aliases, value] },
        }),
      );
    },
    onSuccess: finish,
  });
  return (
    <tr>
      <td>{t(`places.kind.${kind}`)}</td>
      <td>{value}</td>
      <td>
        <div className="row-actions">
          <button type="button" onClick={() => addPlace.mutate()} disabled={addPlace.isPending}>
            {t('places.addAsPlace')}
          </button>
          <label className="sr-only" htmlFor={id}>
            {t('places.aliasOf', { value })}
          </label>
          <select id={id} value={target} onChange={(e) => setTarget(e.target.value)}>
            <option value="">{t('places.choose')}</option>
            {[...places]
              .sort((a, b) => byNumber.compare(a.name, b.name))
              .map((p) => (
                <option key={p.id} value={p.id}>
                  {p.name}
                </option>
              ))}
          </select>
          <button type="button" disabled={!target || addAlias.isPending} onClick={() => addAlias.mutate()}>
            {t('places.addAsAlias')}
          </button>
        </div>
        <ErrorNote error={addPlace.error ?? addAlias.error} />
      </td>
    </tr>
  );
}
