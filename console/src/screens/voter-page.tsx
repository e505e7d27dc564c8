// A voter's page (their record, household, tags, consent and conversations) and the form that adds or edits one.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link, useLocation } from 'wouter';
import { api, envelope } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { useMe } from '../me.ts';
import { Badge, Empty, ErrorNote, Field, Loading, Notice, Section, Table } from '../ui.tsx';
import { commaList, type FieldDef, genders, levels, relations, useVoterFields } from './voter-shared.ts';
import type { components } from '../schema.d.ts';
import { keys, queries } from '../queries.ts';
import { VoterConsent } from './voter-consent.tsx';

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

type Shown = string | number | boolean | null | undefined;
const asText = (value: Shown) => (value === null || value === undefined ? '' : String(value));

/** A custom field's value from its input: typed as the field is, '' as null. */
function fieldValue(def: FieldDef, text: string): string | number | boolean | null {
  if (text === '') return null;
  if (def.type === 'number') return Number(text);
  if (def.type === 'boolean') return text === 'true';
  return text;
}

export function VoterForm({
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
      const body = changesOf(voter, { fields, record, tags, custom }, defs.data ?? []);
      if (voter && Object.keys(body).length === 0) return; // nothing changed
      if (voter) await envelope(api.PUT('/api/voters/{id}', { params: { path: { id: voter.id } }, body }));
      else await envelope(api.POST('/api/voters', { body: body as { name: string; phone: string } }));
    },
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: keys.voters });
      void client.invalidateQueries({ queryKey: keys.voter });
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
              required={k === 'name' || (k === 'phone' && !voter)}
              type={k === 'email' ? 'email' : k === 'phone' ? 'tel' : 'text'}
              onChange={(e) => setFields({ ...fields, [k]: e.target.value })}
            />
          </Field>
        ))}
        <RecordFields record={record} setRecord={setRecord} />
        <Field label={t('field.tags')} hint={t('voters.tagsHint')}>
          <input value={tags} onChange={(e) => setTags(e.target.value)} />
        </Field>
        <CustomFields defs={defs.data ?? []} custom={custom} setCustom={setCustom} />
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

type FormVoter = { id: number; tags?: string[]; fields?: Record<string, Shown> } & Partial<
  Record<keyof VoterFields | RecordKey, Shown>
>;

/** The body to send: for a new voter what is filled in; for an edit what changed (a cleared value is null). */
function changesOf(
  voter: FormVoter | undefined,
  {
    fields,
    record,
    tags,
    custom,
  }: { fields: VoterFields; record: Record<RecordKey, string>; tags: string; custom: Record<string, string> },
  defs: FieldDef[],
): Record<string, unknown> {
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
  for (const def of defs) {
    const text = custom[def.key] ?? '';
    if (given(text, voter?.fields?.[def.key])) values[def.key] = fieldValue(def, text);
  }
  if (Object.keys(values).length > 0) body.fields = values;
  return body;
}

/** The roll's fields: gender, relation and support level chosen, the others typed. */
function RecordFields({
  record,
  setRecord,
}: {
  record: Record<RecordKey, string>;
  setRecord: (record: Record<RecordKey, string>) => void;
}) {
  const { t } = useI18n();
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
    <>
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
    </>
  );
}

/** The workspace's custom fields, each as its type asks. */
function CustomFields({
  defs,
  custom,
  setCustom,
}: {
  defs: FieldDef[];
  custom: Record<string, string>;
  setCustom: (custom: Record<string, string>) => void;
}) {
  const { t } = useI18n();
  return (
    <>
      {defs.map((def) => (
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
    </>
  );
}

/** One voter: their record, messages to them, their conversations and grievances; edit and delete. */
export function VoterPage({ id }: { id: number }) {
  const { t } = useI18n();
  const me = useMe();
  const [, navigate] = useLocation();
  const client = useQueryClient();
  const [editing, setEditing] = useState(false);
  const voter = useQuery(queries.voter(id));
  const staff = me.user.role !== 'volunteer';
  const remove = useMutation({
    mutationFn: () => envelope(api.DELETE('/api/voters/{id}', { params: { path: { id } } })),
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: keys.voters });
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
      <VoterRecord v={v} />
      <VoterConsent v={v} />
      <Household v={v} />
      <VoterActivity phone={v.phone} staff={staff} />
      {!staff && <Notice>{t('voters.readOnly')}</Notice>}
    </>
  );
}

type Voter = components['schemas']['Voter'];

/** The voter's record: the contact and roll fields, tags, and custom fields. */
function VoterRecord({ v }: { v: Voter }) {
  const { t } = useI18n();
  const fieldDefs = useVoterFields();
  const shownRecord = (k: RecordKey, value: Shown): string => {
    if (value === null || value === undefined || value === '') return '—';
    if (k === 'gender') return t(`gender.${value as (typeof genders)[number]}`);
    if (k === 'relation_type') return t(`relation.${value as (typeof relations)[number]}`);
    if (k === 'support_level') return t(`support.${String(value) as (typeof levels)[number]}`);
    return String(value);
  };
  return (
    <>
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
    </>
  );
}

/** The others of the voter's house, and a link to list them. */
function Household({ v }: { v: Voter }) {
  const { t } = useI18n();
  const [, navigate] = useLocation();
  return (
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
  );
}

/** What the office has exchanged with the voter's phone: messages and grievances (staff), conversations. */
function VoterActivity({ phone, staff }: { phone: string | null; staff: boolean }) {
  const { t, d, code } = useI18n();
  const messages = useQuery({
    ...queries.messageHistory({ to: phone!, per_page: 20 }),
    enabled: staff && !!phone,
  });
  const conversations = useQuery({
    ...queries.conversationList({ search: phone!, per_page: 20 }),
    enabled: !!phone,
  });
  const grievances = useQuery({
    ...queries.grievanceList({ search: phone!, per_page: 20 }),
    enabled: staff && !!phone,
  });
  return (
    <>
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
    </>
  );
}
