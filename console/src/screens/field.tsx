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
  const houses = useMemo(() => byHouse(list.data?.value.voters ?? []), [list.data]);
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
                <WalkVoter
                  key={v.id}
                  voter={v}
                  survey={turf.survey}
                  open={open === v.id}
                  toggle={() => setOpen(open === v.id ? null : v.id)}
                  outcome={done[v.id] ?? v.last_visit?.outcome}
                  recorded={(outcome) => {
                    setDone({ ...done, [v.id]: outcome });
                    setOpen(null);
                  }}
                />
              ))}
            </ul>
          </li>
        ))}
      </ul>
    </>
  );
}

/** The walk list's voters in houses: consecutive voters of one part and house number are one house. */
function byHouse(voters: WalkItem[]) {
  const out: Array<{ key: string; voters: WalkItem[] }> = [];
  for (const v of voters) {
    const key = v.house_number ? `${v.part_number ?? ''}/${v.house_number}` : `v${v.id}`;
    const last = out[out.length - 1];
    if (last && last.key === key) last.voters.push(v);
    else out.push({ key, voters: [v] });
  }
  return out;
}

/** One voter of a house: serial, age, gender, the last visit's outcome, and the visit form a tap away. */
function WalkVoter({
  voter: v,
  survey,
  open,
  toggle,
  outcome,
  recorded,
}: {
  voter: WalkItem;
  survey: Turf['survey'];
  open: boolean;
  toggle: () => void;
  outcome: string | undefined;
  recorded: (outcome: string) => void;
}) {
  const { t } = useI18n();
  return (
    <li className="walk-voter">
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
        {outcome && (
          <p className="muted">{t('field.lastVisit', { outcome: t(`outcome.${outcome}` as Key) })}</p>
        )}
      </div>
      <button type="button" aria-expanded={open} onClick={toggle}>
        {t('field.visit')}
      </button>
      {open && <VisitForm voter={v} survey={survey} onDone={recorded} />}
    </li>
  );
}

/** Tags, a note and (for the office) support, then one tap on the outcome records the visit. */
function VisitForm({
  voter,
  survey,
  onDone,
}: {
  voter: WalkItem;
  survey: Turf['survey'];
  onDone: (outcome: string) => void;
}) {
  const { t } = useI18n();
  const [answers, setAnswers] = useState<Record<string, string>>({});
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
        ...surveyAnswers(survey, answers),
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
      {survey && <DoorQuestions survey={survey} answers={answers} setAnswers={setAnswers} />}
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
  const { t } = useI18n();
  const list = useWalkList(turfId);
  const turf = list.data?.value.turf;
  return (
    <>
      <div className="page-head">
        <h1>{t('field.pollDay')}</h1>
        {turf && <p className="muted">{turf.name}</p>}
      </div>
      <QueueLine />
      {list.data?.offline && <Notice>{t('field.offline')}</Notice>}
      <Section title={t('field.slip')}>
        <Slip part={turf?.filters.part_number} />
      </Section>
    </>
  );
}

/** The slip: the part (the turf's, when it has one), a serial, "Voted"; the serials marked so far. */
function Slip({ part: turfPart }: { part: number | undefined }) {
  const { t, n } = useI18n();
  const [part, setPart] = useState('');
  const [serial, setSerial] = useState('');
  const [marked, setMarked] = useState<number[]>([]);
  useEffect(() => {
    if (turfPart && !part) setPart(String(turfPart));
  }, [turfPart, part]);
  // The field is cleared at once, before the mark is stored: an agent types the next serial straight away.
  const mark = () => {
    const partNumber = Number(part);
    const serialNumber = Number(serial);
    const valid = (x: number) => Number.isInteger(x) && x >= 1 && x <= 9999;
    if (!valid(partNumber) || !valid(serialNumber)) return;
    setSerial('');
    setMarked((before) => [serialNumber, ...before].slice(0, 50));
    const client_id = crypto.randomUUID();
    const marked_at = new Date().toISOString();
    void enqueue({
      kind: 'mark',
      client_id,
      queued_at: Date.now(),
      body: { client_id, part_number: partNumber, serial_number: serialNumber, voted: true, marked_at },
    });
  };
  const digits = (value: string, set: (v: string) => void) => (
    <input inputMode="numeric" pattern="[0-9]*" value={value} onChange={(e) => set(e.target.value)} />
  );
  return (
    <>
      <form
        className="slip"
        onSubmit={(e) => {
          e.preventDefault();
          mark();
        }}
      >
        <Field label={t('field.part')}>{digits(part, setPart)}</Field>
        <Field label={t('field.serialNumber')}>{digits(serial, setSerial)}</Field>
        <button type="submit" className="primary big">
          {t('field.voted')}
        </button>
      </form>
      {marked.length > 0 && (
        <p className="muted" role="status">
          {t('field.markedSerials', { list: marked.map((s) => n(s)).join(', ') })}
        </p>
      )}
    </>
  );
}

/** The answers given, as a visit carries them (`survey_id` and `answers`), or nothing when none was given. */
function surveyAnswers(survey: Turf['survey'], answers: Record<string, string>) {
  const given = Object.fromEntries(Object.entries(answers).filter(([, v]) => v.trim() !== ''));
  if (!survey || Object.keys(given).length === 0) return {};
  return { survey_id: survey.id, answers: given };
}

/** The door survey's questions: a choice as a select, a number or text as a field. */
function DoorQuestions({
  survey,
  answers,
  setAnswers,
}: {
  survey: NonNullable<Turf['survey']>;
  answers: Record<string, string>;
  setAnswers: (next: Record<string, string>) => void;
}) {
  const { t, lang } = useI18n();
  const text = (texts: Record<string, string | undefined>) => texts[lang] ?? Object.values(texts)[0] ?? '';
  const set = (key: string, value: string) => setAnswers({ ...answers, [key]: value });
  return (
    <fieldset className="door-survey">
      <legend>{survey.name}</legend>
      {survey.questions.map((q) => (
        <Field key={q.key} label={text(q.text)}>
          {q.type === 'choice' ? (
            <select value={answers[q.key] ?? ''} onChange={(e) => set(q.key, e.target.value)}>
              <option value="">{t('field.notAsked')}</option>
              {(q.choices ?? []).map((c) => (
                <option key={c.key} value={c.key}>
                  {text(c.label)}
                </option>
              ))}
            </select>
          ) : (
            <input
              inputMode={q.type === 'number' ? 'numeric' : 'text'}
              value={answers[q.key] ?? ''}
              onChange={(e) => set(q.key, e.target.value)}
              maxLength={500}
            />
          )}
        </Field>
      ))}
    </fieldset>
  );
}
