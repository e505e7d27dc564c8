// Settings: the workspace's channel accounts, each with its set-up form, its provider log and a test send.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { ChannelLog } from './channel-log.tsx';
import { useEffect, useState } from 'react';
import { api, envelope } from '../api.ts';
import type { components, operations } from '../schema.d.ts';
import { useI18n } from '../i18n.tsx';
import { keys, queries, useProviders } from '../queries.ts';
import { Badge, Empty, ErrorNote, Field, Loading, Notice, Section, Table } from '../ui.tsx';

type ProviderField = components['schemas']['ProviderField'];
type ProviderName = components['schemas']['ChannelAccount']['provider'];

/** A field's value as the API takes it: a whole number, true/false, or text (by the provider's own schema). */
function fieldValue(field: ProviderField, value: string): string | number | boolean {
  if (field.type === 'integer') return Number(value);
  if (field.type === 'boolean') return value === 'true';
  return value;
}

/** One input of a provider's form: text, a number, or yes/no, with what it is for and which channels need it. */
function ProviderInput({
  field,
  secret,
  value,
  onChange,
}: {
  field: ProviderField;
  secret: boolean;
  value: string;
  onChange: (value: string) => void;
}) {
  const { t, lang } = useI18n();
  const channels = field.required_for.map((c) => t(`channel.${c}`)).join(', ');
  // The provider's own words for its field, in the console's language (its adapter gives both).
  const label = field.label[lang] || field.name;
  const hint = [
    field.hint[lang] ?? field.description,
    channels ? t('settings.neededFor', { channels }) : null,
    secret ? t('settings.secretHint') : null,
  ]
    .filter(Boolean)
    .join(' ');
  return (
    <Field label={field.required ? `${label} *` : label} hint={hint || undefined}>
      {field.type === 'boolean' ? (
        <select value={value} onChange={(e) => onChange(e.target.value)}>
          <option value="">—</option>
          <option value="true">{t('yes')}</option>
          <option value="false">{t('no')}</option>
        </select>
      ) : (
        <input
          type={secret ? 'password' : field.type === 'integer' ? 'number' : 'text'}
          autoComplete="off"
          required={field.required}
          min={field.minimum}
          max={field.maximum}
          maxLength={field.max_length}
          value={value}
          onChange={(e) => onChange(e.target.value)}
        />
      )}
    </Field>
  );
}

type Account = components['schemas']['ChannelAccount'];
type Provider = components['schemas']['ProviderDescription'];

export function ChannelAccounts() {
  const { t } = useI18n();
  const client = useQueryClient();
  const accounts = useQuery(queries.channelAccounts());
  const providers = useProviders();
  const refresh = () => client.invalidateQueries({ queryKey: keys.channelAccounts });
  const [managing, setManaging] = useState<string | null>(null);
  const remove = useMutation({
    mutationFn: (id: string) =>
      envelope(api.DELETE('/api/channel-accounts/{id}', { params: { path: { id } } })),
    onSuccess: refresh,
  });
  const account = accounts.data?.data.find((a) => a.id === managing);
  const accountSpec = providers.data?.find((p) => p.name === account?.provider);
  return (
    <Section title={t('settings.accounts')}>
      <ErrorNote error={accounts.error ?? remove.error ?? providers.error} />
      {accounts.isPending ? (
        <Loading />
      ) : accounts.data?.data.length === 0 ? (
        <Empty>{t('settings.noAccounts')}</Empty>
      ) : (
        <AccountsTable
          accounts={accounts.data?.data ?? []}
          providers={providers.data ?? []}
          managing={managing}
          manage={(id) => setManaging(managing === id ? null : id)}
          remove={(id) => remove.mutate(id)}
        />
      )}
      {account && accountSpec && (
        <AccountPanel key={account.id} account={account} spec={accountSpec} onChange={() => void refresh()} />
      )}
      <AddAccount refresh={refresh} />
    </Section>
  );
}

/** The accounts, each with Manage and Delete. */
function AccountsTable({
  accounts,
  providers,
  managing,
  manage,
  remove,
}: {
  accounts: Account[];
  providers: Provider[];
  managing: string | null;
  manage: (id: string) => void;
  remove: (id: string) => void;
}) {
  const { t } = useI18n();
  // The table's headings, and each cell's heading when the table stacks on a phone (its buttons stay in view).
  const accountColumns = [t('field.name'), t('settings.provider'), t('settings.channels'), t('field.status')];
  return (
    <Table caption={t('settings.accounts')} head={[...accountColumns, '']} stacked>
      {accounts.map((a) => (
        <tr key={a.id}>
          <td data-label={accountColumns[0]}>{a.name}</td>
          <td data-label={accountColumns[1]}>
            {providers.find((p) => p.name === a.provider)?.label ?? a.provider}
          </td>
          <td data-label={accountColumns[2]}>{a.channels.map((c) => t(`channel.${c}`)).join(', ')}</td>
          <td data-label={accountColumns[3]}>
            <Badge value={a.active ? 'active' : 'inactive'} /> {a.disabled_reason}
          </td>
          <td>
            <button type="button" aria-expanded={managing === a.id} onClick={() => manage(a.id)}>
              {t('settings.manage')}
            </button>{' '}
            <button
              type="button"
              className="danger"
              onClick={() => window.confirm(t('settings.confirmDelete', { name: a.name })) && remove(a.id)}
            >
              {t('delete')}
            </button>
          </td>
        </tr>
      ))}
    </Table>
  );
}

/** The settings and credentials typed into the form (`s.<name>`, `c.<name>`), those given only. */
function givenFields(spec: Provider | undefined, fields: Record<string, string>) {
  const given = (list: ProviderField[], prefix: string) => list.filter((f) => fields[`${prefix}.${f.name}`]);
  const settings = Object.fromEntries(
    given(spec?.settings ?? [], 's').map((f) => [f.name, fieldValue(f, fields[`s.${f.name}`]!)]),
  );
  const credentials = Object.fromEntries(
    given(spec?.credentials ?? [], 'c').map((f) => [f.name, fields[`c.${f.name}`]!]),
  );
  return { settings, credentials };
}

/** A new account: its name, provider, and the provider's settings and credentials. */
function AddAccount({ refresh }: { refresh: () => Promise<unknown> }) {
  const { t } = useI18n();
  const providers = useProviders();
  const [name, setName] = useState('');
  const [provider, setProvider] = useState<ProviderName>('sandbox');
  const spec = providers.data?.find((p) => p.name === provider);
  const [fields, setFields] = useState<Record<string, string>>({});
  const add = useMutation({
    mutationFn: () =>
      envelope(api.POST('/api/channel-accounts', { body: { name, provider, ...givenFields(spec, fields) } })),
    onSuccess: () => {
      setName('');
      setFields({});
      void refresh();
    },
  });
  return (
    <>
      <h3 id="add-account">{t('settings.addAccount')}</h3>
      <form
        aria-labelledby="add-account"
        className="form-grid"
        onSubmit={(e) => {
          e.preventDefault();
          add.mutate();
        }}
      >
        <Field label={t('field.name')}>
          <input required value={name} onChange={(e) => setName(e.target.value)} />
        </Field>
        <Field label={t('settings.provider')}>
          <select
            value={provider}
            onChange={(e) => {
              setProvider(e.target.value as ProviderName);
              setFields({});
            }}
          >
            {(providers.data ?? []).map((p) => (
              <option key={p.name} value={p.name}>
                {p.label} ({p.channels.map((c) => t(`channel.${c}`)).join(', ')})
              </option>
            ))}
          </select>
        </Field>
        {spec?.settings.map((f) => (
          <ProviderInput
            key={`s.${f.name}`}
            field={f}
            secret={false}
            value={fields[`s.${f.name}`] ?? ''}
            onChange={(value) => setFields({ ...fields, [`s.${f.name}`]: value })}
          />
        ))}
        {spec?.credentials.map((f) => (
          <ProviderInput
            key={`c.${f.name}`}
            field={f}
            secret
            value={fields[`c.${f.name}`] ?? ''}
            onChange={(value) => setFields({ ...fields, [`c.${f.name}`]: value })}
          />
        ))}
        <ErrorNote error={add.error} />
        <div className="actions">
          <button className="primary" disabled={add.isPending}>
            {t('add')}
          </button>
        </div>
      </form>
    </>
  );
}

/**
 * One account, managed: the channels it carries by default, on and off, the callback URLs and verify token to
 * paste at the provider, its name and fields, and a test send (with a template where its provider needs one).
 */
function AccountPanel({
  account,
  spec,
  onChange,
}: {
  account: Account;
  spec: Provider;
  onChange: () => void;
}) {
  const { t } = useI18n();
  const patch = useMutation({
    mutationFn: (body: AccountPatch) =>
      envelope(api.PATCH('/api/channel-accounts/{id}', { params: { path: { id: account.id } }, body })),
    onSuccess: onChange,
  });
  return (
    <div className="panel" role="region" aria-label={account.name}>
      <h3>{account.name}</h3>
      <ErrorNote error={patch.error} />
      {patch.isSuccess && <Notice>{t('settings.saved')}</Notice>}
      <AccountDefaults account={account} patch={patch} />
      <CallbackUrls account={account} />
      <AccountFields account={account} spec={spec} patch={patch} />
      <TestSend account={account} spec={spec} />
      <ChannelLog id={account.id} name={account.name} />
    </div>
  );
}

type AccountPatch = NonNullable<
  operations['patchChannelAccountsId']['requestBody']
>['content']['application/json'];
type Patch = { isPending: boolean; mutate: (body: AccountPatch) => void };

/** The channels the account carries by default, and switching it on or off. */
function AccountDefaults({ account, patch }: { account: Account; patch: Patch }) {
  const { t } = useI18n();
  const [defaults, setDefaults] = useState<string[]>(account.default_for);
  // Switching an account off clears its defaults: the boxes follow what the service says.
  const stored = account.default_for.join();
  useEffect(() => setDefaults(stored ? stored.split(',') : []), [stored]);
  return (
    <fieldset>
      <legend>{t('settings.defaultFor')}</legend>
      {account.channels.map((c) => (
        <label key={c} className="check">
          <input
            type="checkbox"
            checked={defaults.includes(c)}
            onChange={(e) =>
              setDefaults(e.target.checked ? [...defaults, c] : defaults.filter((d) => d !== c))
            }
          />{' '}
          {t(`channel.${c}`)}
        </label>
      ))}
      <p className="muted">{t('settings.defaultHint')}</p>
      <div className="actions">
        <button
          type="button"
          disabled={patch.isPending}
          onClick={() => patch.mutate({ default_for: defaults as Account['default_for'] })}
        >
          {t('settings.saveDefaults')}
        </button>{' '}
        <button
          type="button"
          disabled={patch.isPending}
          onClick={() => patch.mutate({ active: !account.active })}
        >
          {account.active ? t('settings.switchOff') : t('settings.switchOn')}
        </button>
      </div>
    </fieldset>
  );
}

/** The callback URLs and verify token to paste at the provider, each with a Copy button. */
function CallbackUrls({ account }: { account: Account }) {
  const { t } = useI18n();
  const [copied, setCopied] = useState<string | null>(null);
  const copy = (label: string, text: string) =>
    void navigator.clipboard?.writeText(text).then(
      () => setCopied(label),
      () => setCopied(null),
    );
  return (
    <>
      {(Object.keys(account.callback_urls).length > 0 || account.verify_token) && (
        <fieldset>
          <legend>{t('settings.callbacks')}</legend>
          <p className="muted">{t('settings.callbacksHint')}</p>
          {[
            ...Object.entries(account.callback_urls),
            ...(account.verify_token ? [[t('settings.verifyToken'), account.verify_token] as const] : []),
          ].map(([kind, url]) => (
            <div key={kind} className="copy-row">
              <Field label={kind}>
                <input readOnly value={url} onFocus={(e) => e.target.select()} />
              </Field>
              <button type="button" onClick={() => copy(kind, url)}>
                {copied === kind ? t('settings.copied') : t('settings.copy')}
              </button>
            </div>
          ))}
        </fieldset>
      )}
    </>
  );
}

/** The account's name, settings and (never shown, only replaced) credentials. */
function AccountFields({ account, spec, patch }: { account: Account; spec: Provider; patch: Patch }) {
  const { t } = useI18n();
  const [name, setName] = useState(account.name);
  const [fields, setFields] = useState<Record<string, string>>(
    Object.fromEntries(Object.entries(account.settings).map(([k, v]) => [`s.${k}`, String(v)])),
  );
  const save = () => {
    const settings = Object.fromEntries(
      spec.settings
        .filter((f) => (fields[`s.${f.name}`] ?? '') !== '')
        .map((f) => [f.name, fieldValue(f, fields[`s.${f.name}`]!)]),
    );
    const credentials = Object.fromEntries(
      spec.credentials.filter((f) => fields[`c.${f.name}`]).map((f) => [f.name, fields[`c.${f.name}`]!]),
    );
    patch.mutate({
      name,
      ...(Object.keys(settings).length ? { settings } : {}),
      ...(Object.keys(credentials).length ? { credentials } : {}),
    });
  };
  return (
    <form
      className="form-grid"
      onSubmit={(e) => {
        e.preventDefault();
        save();
      }}
    >
      <Field label={t('field.name')}>
        <input required value={name} onChange={(e) => setName(e.target.value)} />
      </Field>
      {spec.settings.map((f) => (
        <ProviderInput
          key={`s.${f.name}`}
          field={f}
          secret={false}
          value={fields[`s.${f.name}`] ?? ''}
          onChange={(value) => setFields({ ...fields, [`s.${f.name}`]: value })}
        />
      ))}
      {spec.credentials.map((f) => (
        <ProviderInput
          key={`c.${f.name}`}
          field={{ ...f, required: false, description: t('settings.keepSecret') }}
          secret
          value={fields[`c.${f.name}`] ?? ''}
          onChange={(value) => setFields({ ...fields, [`c.${f.name}`]: value })}
        />
      ))}
      <div className="actions">
        <button className="primary" disabled={patch.isPending}>
          {t('save')}
        </button>
      </div>
    </form>
  );
}

function TestSend({ account, spec }: { account: Account; spec: Provider }) {
  const { t } = useI18n();
  const [to, setTo] = useState('');
  const [channel, setChannel] = useState(account.channels[0]!);
  const [template, setTemplate] = useState('');
  const templates = useQuery(queries.templates());
  // A provider that sends only its own templates needs one with its id there.
  const usable = (templates.data?.data ?? []).filter(
    (tpl) =>
      tpl.channel === channel && (spec.templates?.sends !== 'only' || tpl.provider_template_ids[spec.name]),
  );
  const test = useMutation({
    mutationFn: () =>
      envelope(
        api.POST('/api/channel-accounts/{id}/test', {
          params: { path: { id: account.id } },
          body: { to, channel, ...(template ? { template_id: template } : {}) },
        }),
      ),
  });
  return (
    <form
      className="filters"
      onSubmit={(e) => {
        e.preventDefault();
        test.mutate();
      }}
    >
      <Field label={t('settings.testTo')} hint={t('settings.testHint')}>
        <input required value={to} onChange={(e) => setTo(e.target.value)} />
      </Field>
      {account.channels.length > 1 && (
        <Field label={t('field.channel')}>
          <select
            value={channel}
            onChange={(e) => {
              setChannel(e.target.value as Account['channels'][number]);
              setTemplate('');
            }}
          >
            {account.channels.map((c) => (
              <option key={c} value={c}>
                {t(`channel.${c}`)}
              </option>
            ))}
          </select>
        </Field>
      )}
      <Field
        label={t('settings.testTemplate')}
        hint={
          spec.templates?.sends === 'only'
            ? t('settings.templateNeeded', { provider: spec.label })
            : undefined
        }
      >
        <select value={template} onChange={(e) => setTemplate(e.target.value)}>
          <option value="">{t('settings.noTemplate')}</option>
          {usable.map((tpl) => (
            <option key={tpl.id} value={tpl.id}>
              {tpl.name}
            </option>
          ))}
        </select>
      </Field>
      <button className="primary" disabled={test.isPending}>
        {t('settings.sendTest')}
      </button>
      <ErrorNote error={test.error} />
      {test.isSuccess && <Notice>{test.data.message ?? t('settings.testSent')}</Notice>}
    </form>
  );
}
