import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, envelope } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { Badge, Empty, ErrorNote, Field, Section, Table } from '../ui.tsx';
import { commaList, useVoterFields } from './voter-shared.ts';
import { keys } from '../queries.ts';

const types = ['text', 'number', 'date', 'choice', 'boolean'] as const;

type FieldDef = NonNullable<ReturnType<typeof useVoterFields>['data']>[number];

/** A field's choices (for a choice field) and its sensitivity: the inputs the add and edit forms share. */
function ChoicesAndSensitivity({
  choice,
  choices: [choices, setChoices],
  sensitive: [sensitive, setSensitive],
}: {
  choice: boolean;
  choices: [string, (value: string) => void];
  sensitive: [boolean, (value: boolean) => void];
}) {
  const { t } = useI18n();
  return (
    <>
      {choice && (
        <Field label={t('fields.choices')} hint={t('fields.choicesHint')}>
          <input required value={choices} onChange={(e) => setChoices(e.target.value)} />
        </Field>
      )}
      <label className="check">
        <input type="checkbox" checked={sensitive} onChange={(e) => setSensitive(e.target.checked)} />{' '}
        {t('fields.sensitive')}
      </label>
    </>
  );
}

/** One field's label, choices and sensitivity, changed (its key and type stay). */
function EditField({ def, onDone }: { def: FieldDef; onDone(): void }) {
  const { t } = useI18n();
  const client = useQueryClient();
  const [label, setLabel] = useState(def.label);
  const [choices, setChoices] = useState((def.choices ?? []).join(', '));
  const [sensitive, setSensitive] = useState(def.sensitive);
  const save = useMutation({
    mutationFn: () =>
      envelope(
        api.PATCH('/api/voter-fields/{key}', {
          params: { path: { key: def.key } },
          body: { label, sensitive, ...(def.type === 'choice' ? { choices: commaList(choices) } : {}) },
        }),
      ),
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: keys.voterFields });
      onDone();
    },
  });
  return (
    <form
      className="filters"
      aria-label={t('fields.editing', { label: def.label })}
      onSubmit={(e) => {
        e.preventDefault();
        save.mutate();
      }}
    >
      <p className="muted">{t('fields.keyFixed')}</p>
      <Field label={t('fields.label')}>
        <input required value={label} onChange={(e) => setLabel(e.target.value)} />
      </Field>
      <ChoicesAndSensitivity
        choice={def.type === 'choice'}
        choices={[choices, setChoices]}
        sensitive={[sensitive, setSensitive]}
      />
      <button className="primary" disabled={save.isPending}>
        {t('fields.save')}
      </button>
      <button type="button" onClick={onDone}>
        {t('cancel')}
      </button>
      <ErrorNote error={save.error} />
    </form>
  );
}

/** The workspace's custom voter fields: list, add, change, delete (the politician's, in Settings). */
export function VoterFieldsSettings() {
  const { t } = useI18n();
  const client = useQueryClient();
  const fields = useVoterFields();
  const [editing, setEditing] = useState<string | null>(null);
  const refresh = () => void client.invalidateQueries({ queryKey: keys.voterFields });
  const remove = useMutation({
    mutationFn: (k: string) =>
      envelope(api.DELETE('/api/voter-fields/{key}', { params: { path: { key: k } } })),
    onSuccess: refresh,
  });
  // The table's headings, and each cell's heading when the table stacks on a phone.
  const columns = [t('fields.label'), t('fields.key'), t('fields.type'), t('fields.choices')];
  return (
    <Section title={t('fields.title')}>
      <p className="muted">{t('fields.help')}</p>
      <ErrorNote error={fields.error ?? remove.error} />
      {fields.data && fields.data.length === 0 ? (
        <Empty>{t('fields.none')}</Empty>
      ) : (
        <Table caption={t('fields.title')} head={[...columns, '']} stacked>
          {(fields.data ?? []).map((f) => (
            <tr key={f.key}>
              <td data-label={columns[0]}>
                {f.label} {f.sensitive && <Badge value={t('fields.sensitive')} />}
              </td>
              <td data-label={columns[1]}>
                <code>{f.key}</code>
              </td>
              <td data-label={columns[2]}>{t(`fields.type.${f.type}`)}</td>
              <td data-label={columns[3]}>{(f.choices ?? []).join(', ')}</td>
              <td>
                <button
                  type="button"
                  aria-expanded={editing === f.key}
                  onClick={() => setEditing(editing === f.key ? null : f.key)}
                >
                  {t('fields.edit')}
                </button>{' '}
                <button
                  type="button"
                  className="danger"
                  onClick={() => {
                    if (window.confirm(t('fields.confirmDelete', { label: f.label }))) remove.mutate(f.key);
                  }}
                >
                  {t('delete')}
                </button>
              </td>
            </tr>
          ))}
        </Table>
      )}
      {(fields.data ?? [])
        .filter((f) => f.key === editing)
        .map((f) => (
          <EditField key={f.key} def={f} onDone={() => setEditing(null)} />
        ))}
      <AddField refresh={refresh} />
    </Section>
  );
}

/** A new custom field: its label, key, type, choices and sensitivity. */
function AddField({ refresh }: { refresh: () => void }) {
  const { t } = useI18n();
  const [key, setKey] = useState('');
  const [label, setLabel] = useState('');
  const [type, setType] = useState<(typeof types)[number]>('text');
  const [choices, setChoices] = useState('');
  const [sensitive, setSensitive] = useState(false);
  const add = useMutation({
    mutationFn: () =>
      envelope(
        api.POST('/api/voter-fields', {
          body: {
            key: key.trim(),
            label,
            type,
            sensitive,
            ...(type === 'choice' ? { choices: commaList(choices) } : {}),
          },
        }),
      ),
    onSuccess: () => {
      setKey('');
      setLabel('');
      setChoices('');
      setSensitive(false);
      refresh();
    },
  });
  return (
    <form
      className="filters"
      aria-label={t('fields.add')}
      onSubmit={(e) => {
        e.preventDefault();
        add.mutate();
      }}
    >
      <Field label={t('fields.label')}>
        <input required value={label} onChange={(e) => setLabel(e.target.value)} />
      </Field>
      <Field label={t('fields.key')} hint={t('fields.keyHint')}>
        <input required pattern="[a-z0-9_]{1,40}" value={key} onChange={(e) => setKey(e.target.value)} />
      </Field>
      <Field label={t('fields.type')}>
        <select value={type} onChange={(e) => setType(e.target.value as (typeof types)[number])}>
          {types.map((ty) => (
            <option key={ty} value={ty}>
              {t(`fields.type.${ty}`)}
            </option>
          ))}
        </select>
      </Field>
      <ChoicesAndSensitivity
        choice={type === 'choice'}
        choices={[choices, setChoices]}
        sensitive={[sensitive, setSensitive]}
      />
      <button className="primary" disabled={add.isPending}>
        {t('fields.add')}
      </button>
      <ErrorNote error={add.error} />
    </form>
  );
}
