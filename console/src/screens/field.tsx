import { useQuery } from '@tanstack/react-query';
import { useEffect, useMemo, useState } from 'react';
import { Link } from 'wouter';
import { api, data } from '../api.ts';
import { cached, enqueue, flush, keep, onQueue, refused } from '../field-store.ts';
import { useI18n } from '../i18n.tsx';
import { useMe } from '../me.ts';
import type { components } from '../schema.d.ts';
import type { Key } from '../strings.ts';
import { Empty, ErrorNote, Field, Loading, Notice, Section } from '../ui.tsx';

/**
 * The field screens (the contract's fourth part, "Field work"), made for a phone at a door or a booth with a
 * network that comes and goes: my turfs, the walk list grouped by house with a one-tap visit form, and poll-day
 * marking by serial number as on a booth agent's slip. What was opened is kept on the device; visits and marks
 * wait in a queue (field-store.ts) and the screen says how many.
 */

type Turf = components['schemas']['Turf'];
type WalkItem = components['schemas']['WalkListItem'];
const outcomes = ['met', 'not_home', 'refused', 'moved', 'deceased', 'wrong_address'] as const;

/**
 * Reads from the service and keeps the answer on the device; without the network (or when the service fails to
 * answer), what was kept before.
 */
function useKept<T>(key: string, read: () => Promise<T>) {
  return useQuery({
    queryKey: ['field', key],
    queryFn: async () => {
      try {
        const value = await read();
        await keep(key, value);
        return { value, offline: false };
      } catch (error) {
        const kept = await cached<T>(key);
        if (kept === undefined) throw error;
        return { value: kept, offline: true };
      }
    },
    staleTime: 30_000,
  });
}

/** "n waiting to be sent" (0: all sent), live, with a button to send now. */
export function QueueLine() {
  const { t, n } = useI18n();
  const [count, setCount] = useState<number | undefined>(undefined);
  const [notSent, setNotSent] = useState<Array<{ message: string }>>([]);
  useEffect(
    () =>
      onQueue((waiting) => {
        setCount(waiting);
        void refused().then(setNotSent);
      }),
    [],
  );
  if (count === undefined) return null;
  return (
    <div className="queue-line">
      <p role="status" aria-live="polite" data-waiting={count}>
        {count === 0 ? t('field.allSent') : t('field.waiting', { n: n(count) })}
      </p>
      {count > 0 && (
        <button type="button" onClick={() => void flush()}>
          {t('field.sendNow')}
        </button>
      )}
      {notSent.length > 0 && (
        <details>
          <summary>{t('field.refused', { n: n(notSent.length) })}</summary>
          <ul>
            {notSent.slice(0, 20).map((r, i) => (
              <li key={i}>{r.message}</li>
            ))}
          </ul>
        </details>
      )}
    </div>
  );
}

/** My turfs (a politician or manager: every turf), each with its walk list and poll-day marking. */
export function FieldHome() {
  const { t, n } = useI18n();
  const turfs = useKept('turfs', () =>
    data(api.GET('/api/turfs', { params: { query: { per_page: 100 } } })).then((p) => p.data),
  );
  return (
    <>
      <div className="page-head">
        <h1>{t('nav.field')}</h1>
      </div>
      <QueueLine />
      {turfs.data?.offline && <Notice>{t('field.offline')}</Notice>}
      <ErrorNote error={turfs.error} />
      {turfs.isPending ? (
        <Loading />
      ) : (turfs.data?.value ?? []).length === 0 ? (
        <Empty>{t('field.noTurfs')}</Empty>
      ) : (
        <ul className="turfs">
          {(turfs.data?.value ?? []).map((turf: Turf) => (
            <li key={turf.id} className="card">
              <h2>{turf.name}</h2>
              <p className="muted">
                {t('field.turfSize', { voters: n(turf.voters), households: n(turf.households) })}
              </p>
              <div className="actions">
                <Link href={`/field/${turf.id}`} className="button primary">
                  {t('field.walkList')}
                </Link>
                <Link href={`/field/${turf.id}/poll-day`} className="button">
                  {t('field.pollDay')}
                </Link>
              </div>
            </li>
          ))}
        </ul>
      )}
    </>
  );
}

/** A turf's walk list as kept on the device (up to 2,000 voters). */
function useWalkList(turfId: string) {
  return useKept(`walk:${turfId}`, async () => {
    const [turf, list] = await Promise.all([
      data(api.GET('/api/turfs/{id}', { params: { path: { id: turfId } } })),
      data(
        api.GET('/api/turfs/{id}/walk-list', { params: { path: { id: turfId }, query: { per_page: 2000 } } }),
      ),
    ]);
    return { turf, voters: list.data };
  });
}

/** The walk list, a card per house, each voter with the visit form a tap away. */
export function WalkList({ turfId }: { turfId: string }) {
  const { t } = useI18n();
  const list = useWalkList(turfId);
  const [open, setOpen] = useState<number | null>(null);
  const [done, setDone] = useState<Record<number, string>>({});
  const houses = useMemo(() => {
    const out: Array<{ key: string; voters: WalkItem[] }> = [];
    for (const v of list.data?.value.voters ?? []) {
      const key = v.house_number ? `${v.part_number ?? ''}/${v.house_number}` : `v${v.id}`;
      const last = out[out.length - 1];
      if (last && last.key === key) last.voters.push(v);
      else out.push({ key, voters: [v] });
    }
    return out;
  }, [list.data]);
  if (list.isPending) return <Loading />;
  if (!list.data) return <ErrorNote error={list.error} />;
  const { turf } = list.data.value;
  return (
    <>
      <div className="page-head">
        <h1>{turf.name}</h1>
        <Link href={`/field/${turfId}/poll-day`} className="button">
          {t('field.pollDay')}
        </Link>
      </div>
      <QueueLine />
      {list.data.offline && <Notice>{t('field.offline')}</Notice>}
      {houses.length === 0 && <Empty>{t('field.noVoters')}</Empty>}
      <ul className="houses">
        {houses.map((house) => (
          <li key={house.key} className="card house">
            <h2>
              {house.voters[0]!.house_number
                ? t('field.house', { house: house.voters[0]!.house_number })
                : t('field.noHouse')}
            </h2>
            <ul>
              {house.voters.map((v) => (
                <li key={v.id} className="walk-voter">
                  <div>
                    <strong>{v.name}</strong>
                    {v.name_local && <span lang="hi"> · {v.name_local}</span>}
                    <p className="muted">
                      {[
                        v.serial_number !== null ? t('field.serial', { n: v.serial_number }) : '',
                        v.age !== null ? t('field.ageYears', { n: v.age }) : '',
                        v.gender ? t(`gender.${v.gender}` as Key) || v.gender : '',
                      ]
                        .filter(Boolean)
                        .join(' · ')}
                    </p>
                    {(done[v.id] ?? v.last_visit?.outcome) && (
                      <p className="muted">
                        {t('field.lastVisit', {
                          outcome: t(`outcome.${done[v.id] ?? v.last_visit!.outcome}` as Key),
                        })}
                      </p>
                    )}
                  </div>
                  <button
                    type="button"
                    aria-expanded={open === v.id}
                    onClick={() => setOpen(open === v.id ? null : v.id)}
                  >
                    {t('field.visit')}
                  </button>
                  {open === v.id && (
                    <VisitForm
                      voter={v}
                      onDone={(outcome) => {
                        setDone({ ...done, [v.id]: outcome });
                        setOpen(null);
                      }}
                    />
                  )}
                </li>
              ))}
            </ul>
          </li>
        ))}
      </ul>
    </>
  );
}

/** Tags, a note and (for the office) support, then one tap on the outcome records the visit. */
function VisitForm({ voter, onDone }: { voter: WalkItem; onDone: (outcome: string) => void }) {
  const { t } = useI18n();
  const me = useMe();
  const office = me.user.role !== 'volunteer';
  const [support, setSupport] = useState('');
  const [tags, setTags] = useState('');
  const [note, setNote] = useState('');
  const record = async (outcome: string) => {
    const client_id = crypto.randomUUID();
    const tagsAdd = tags
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    await enqueue({
      kind: 'visit',
      client_id,
      queued_at: Date.now(),
      body: {
        client_id,
        voter_id: voter.id,
        outcome,
        visited_at: new Date().toISOString(),
        ...(office && support ? { support_level: Number(support) } : {}),
        ...(tagsAdd.length > 0 ? { tags_add: tagsAdd } : {}),
        ...(note.trim() ? { note: note.trim() } : {}),
      },
    });
    onDone(outcome);
  };
  return (
    <form
      className="visit-form"
      onSubmit={(e) => e.preventDefault()}
      aria-label={t('field.visitOf', { name: voter.name })}
    >
      {office && (
        <Field label={t('field.support')}>
          <select value={support} onChange={(e) => setSupport(e.target.value)}>
            <option value="">{t('field.supportUnknown')}</option>
            {[1, 2, 3, 4, 5].map((l) => (
              <option key={l} value={l}>
                {t(`support.${l}` as Key)}
              </option>
            ))}
          </select>
        </Field>
      )}
      <Field label={t('field.visitTags')} hint={t('field.tagsHint')}>
        <input value={tags} onChange={(e) => setTags(e.target.value)} maxLength={400} />
      </Field>
      <Field label={t('field.note')}>
        <input value={note} onChange={(e) => setNote(e.target.value)} maxLength={2000} />
      </Field>
      <fieldset className="outcomes">
        <legend>{t('field.outcome')}</legend>
        {outcomes.map((o) => (
          <button
            key={o}
            type="button"
            className={o === 'met' ? 'primary' : ''}
            onClick={() => void record(o)}
          >
            {t(`outcome.${o}`)}
          </button>
        ))}
      </fieldset>
    </form>
  );
}

/** Poll-day marking as a booth agent's slip works: the part, then each serial typed and "voted" tapped. */
export function PollDayMarking({ turfId }: { turfId: string }) {
  const { t, n } = useI18n();
  const list = useWalkList(turfId);
  const turf = list.data?.value.turf;
  const [part, setPart] = useState('');
  const [serial, setSerial] = useState('');
  const [marked, setMarked] = useState<number[]>([]);
  useEffect(() => {
    const fromTurf = turf?.filters.part_number;
    if (fromTurf && !part) setPart(String(fromTurf));
  }, [turf, part]);
  // The field is cleared at once, before the mark is stored: an agent types the next serial straight away.
  const mark = () => {
    const partNumber = Number(part);
    const serialNumber = Number(serial);
    const valid = (x: number) => Number.isInteger(x) && x >= 1 && x <= 9999;
    if (!valid(partNumber) || !valid(serialNumber)) return;
    setSerial('');
    setMarked((before) => [serialNumber, ...before].slice(0, 50));
    const client_id = crypto.randomUUID();
    void enqueue({
      kind: 'mark',
      client_id,
      queued_at: Date.now(),
      body: {
        client_id,
        part_number: partNumber,
        serial_number: serialNumber,
        voted: true,
        marked_at: new Date().toISOString(),
      },
    });
  };
  return (
    <>
      <div className="page-head">
        <h1>{t('field.pollDay')}</h1>
        {turf && <p className="muted">{turf.name}</p>}
      </div>
      <QueueLine />
      {list.data?.offline && <Notice>{t('field.offline')}</Notice>}
      <Section title={t('field.slip')}>
        <form
          className="slip"
          onSubmit={(e) => {
            e.preventDefault();
            mark();
          }}
        >
          <Field label={t('field.part')}>
            <input
              inputMode="numeric"
              pattern="[0-9]*"
              value={part}
              onChange={(e) => setPart(e.target.value)}
            />
          </Field>
          <Field label={t('field.serialNumber')}>
            <input
              inputMode="numeric"
              pattern="[0-9]*"
              value={serial}
              onChange={(e) => setSerial(e.target.value)}
              autoFocus
            />
          </Field>
          <button type="submit" className="primary big">
            {t('field.voted')}
          </button>
        </form>
        {marked.length > 0 && (
          <p className="muted" role="status">
            {t('field.markedSerials', { list: marked.map((s) => n(s)).join(', ') })}
          </p>
        )}
      </Section>
    </>
  );
}
