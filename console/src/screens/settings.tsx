import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { ChannelLog } from './channel-log.tsx';
import { useEffect, useState } from 'react';
import { allPages, api, data, envelope } from '../api.ts';
import type { components, operations } from '../schema.d.ts';
import { useI18n } from '../i18n.tsx';
import { useProviders, useWorkspace, workspaceKey } from '../queries.ts';
import { Badge, Empty, ErrorNote, Field, Loading, Notice, Pager, Section, Table } from '../ui.tsx';
import { VoterFieldsSettings } from './voter-fields.tsx';

/** Settings (politicians): channel accounts with a test send, webhooks and their deliveries, credits, payments. */
export function Settings() {
  const { t } = useI18n();
  return (
    <>
      <h1>{t('nav.settings')}</h1>
      <WorkspaceSettings />
      <ChannelAccounts />
      <Webhooks />
      <Credits />
      <VoterFieldsSettings />
    </>
  );
}

/**
 * The workspace's name, its time zone (every time in the console is shown and typed in that zone) and the
 * language of its voters who have none.
 */
function WorkspaceSettings() {
  const { t } = useI18n();
  const client = useQueryClient();
  const workspace = useWorkspace();
  const [zone, setZone] = useState<string | null>(null);
  const [name, setName] = useState<string | null>(null);
  const [language, setLanguage] = useState<'en' | 'hi' | null>(null);
  const save = useMutation({
    mutationFn: () =>
      envelope(
        api.PATCH('/api/workspace', {
          body: {
            ...(zone !== null ? { timezone: zone || null } : {}),
            ...(name !== null ? { name } : {}),
            ...(language !== null ? { default_language: language } : {}),
          },
        }),
      ),
    onSuccess: () => {
      setZone(null);
      setName(null);
      setLanguage(null);
      void client.invalidateQueries({ queryKey: workspaceKey });
    },
  });
  if (!workspace.data) return <ErrorNote error={workspace.error} />;
  const value = zone ?? (workspace.data.timezone_set ? workspace.data.timezone : '');
  return (
    <Section title={t('settings.workspace')}>
      <form
        className="filters"
        onSubmit={(e) => {
          e.preventDefault();
          save.mutate();
        }}
      >
        <Field label={t('settings.workspaceName')}>
          <input
            required
            maxLength={200}
            value={name ?? workspace.data.name}
            onChange={(e) => setName(e.target.value)}
          />
        </Field>
        <Field
          label={t('settings.timezone')}
          hint={t('settings.timezoneHint', { zone: workspace.data.timezone })}
        >
          <input
            list="time-zones"
            value={value}
            placeholder={workspace.data.timezone}
            onChange={(e) => setZone(e.target.value)}
          />
        </Field>
        <datalist id="time-zones">
          {['Asia/Kolkata', 'Asia/Kathmandu', 'Asia/Dhaka', 'Asia/Dubai', 'Europe/London', 'UTC'].map((z) => (
            <option key={z} value={z} />
          ))}
        </datalist>
        <Field label={t('settings.defaultLanguage')} hint={t('settings.defaultLanguageHint')}>
          <select
            value={language ?? workspace.data.default_language}
            onChange={(e) => setLanguage(e.target.value as 'en' | 'hi')}
          >
            <option value="en">English</option>
            <option value="hi">हिन्दी</option>
          </select>
        </Field>
        <button
          className="primary"
          disabled={save.isPending || (zone === null && name === null && language === null)}
        >
          {t('save')}
        </button>
      </form>
      <ErrorNote error={save.error} />
      {save.isSuccess && <Notice>{t('settings.saved')}</Notice>}
    </Section>
  );
}

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

function ChannelAccounts() {
  const { t } = useI18n();
  const client = useQueryClient();
  const accounts = useQuery({
    queryKey: ['channel-accounts'],
    queryFn: () =>
      allPages((page) =>
        data(api.GET('/api/channel-accounts', { params: { query: { page, per_page: 100 } } })),
      ),
  });
  const refresh = () => client.invalidateQueries({ queryKey: ['channel-accounts'] });
  const [name, setName] = useState('');
  const providers = useProviders();
  const [provider, setProvider] = useState<ProviderName>('sandbox');
  const spec = providers.data?.find((p) => p.name === provider);
  const [fields, setFields] = useState<Record<string, string>>({});
  const [managing, setManaging] = useState<string | null>(null);
  const add = useMutation({
    mutationFn: () => {
      const given = (list: ProviderField[], prefix: string) =>
        list.filter((f) => fields[`${prefix}.${f.name}`]);
      const settings = Object.fromEntries(
        given(spec?.settings ?? [], 's').map((f) => [f.name, fieldValue(f, fields[`s.${f.name}`]!)]),
      );
      const credentials = Object.fromEntries(
        given(spec?.credentials ?? [], 'c').map((f) => [f.name, fields[`c.${f.name}`]!]),
      );
      return envelope(api.POST('/api/channel-accounts', { body: { name, provider, settings, credentials } }));
    },
    onSuccess: () => {
      setName('');
      setFields({});
      void refresh();
    },
  });
  const remove = useMutation({
    mutationFn: (id: string) =>
      envelope(api.DELETE('/api/channel-accounts/{id}', { params: { path: { id } } })),
    onSuccess: refresh,
  });
  // The table's headings, and each cell's heading when the table stacks on a phone (its buttons stay in view).
  const accountColumns = [t('field.name'), t('settings.provider'), t('settings.channels'), t('field.status')];
  return (
    <Section title={t('settings.accounts')}>
      <ErrorNote error={accounts.error ?? remove.error ?? providers.error} />
      {accounts.isPending ? (
        <Loading />
      ) : accounts.data?.data.length === 0 ? (
        <Empty>{t('settings.noAccounts')}</Empty>
      ) : (
        <Table caption={t('settings.accounts')} head={[...accountColumns, '']} stacked>
          {accounts.data?.data.map((a) => (
            <tr key={a.id}>
              <td data-label={accountColumns[0]}>{a.name}</td>
              <td data-label={accountColumns[1]}>
                {providers.data?.find((p) => p.name === a.provider)?.label ?? a.provider}
              </td>
              <td data-label={accountColumns[2]}>{a.channels.map((c) => t(`channel.${c}`)).join(', ')}</td>
              <td data-label={accountColumns[3]}>
                <Badge value={a.active ? 'active' : 'inactive'} /> {a.disabled_reason}
              </td>
              <td>
                <button
                  type="button"
                  aria-expanded={managing === a.id}
                  onClick={() => setManaging(managing === a.id ? null : a.id)}
                >
                  {t('settings.manage')}
                </button>{' '}
                <button
                  type="button"
                  className="danger"
                  onClick={() =>
                    window.confirm(t('settings.confirmDelete', { name: a.name })) && remove.mutate(a.id)
                  }
                >
                  {t('delete')}
                </button>
              </td>
            </tr>
          ))}
        </Table>
      )}
      {(() => {
        const account = accounts.data?.data.find((a) => a.id === managing);
        const accountSpec = providers.data?.find((p) => p.name === account?.provider);
        return account && accountSpec ? (
          <AccountPanel
            key={account.id}
            account={account}
            spec={accountSpec}
            onChange={() => void refresh()}
          />
        ) : null;
      })()}
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
    </Section>
  );
}

type Account = components['schemas']['ChannelAccount'];
type Provider = components['schemas']['ProviderDescription'];

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
  const path = { params: { path: { id: account.id } } };
  const [defaults, setDefaults] = useState<string[]>(account.default_for);
  // Switching an account off clears its defaults: the boxes follow what the service says.
  const stored = account.default_for.join();
  useEffect(() => setDefaults(stored ? stored.split(',') : []), [stored]);
  const [name, setName] = useState(account.name);
  const [fields, setFields] = useState<Record<string, string>>(
    Object.fromEntries(Object.entries(account.settings).map(([k, v]) => [`s.${k}`, String(v)])),
  );
  const [copied, setCopied] = useState<string | null>(null);
  const patch = useMutation({
    mutationFn: (
      body: NonNullable<operations['patchChannelAccountsId']['requestBody']>['content']['application/json'],
    ) => envelope(api.PATCH('/api/channel-accounts/{id}', { ...path, body })),
    onSuccess: onChange,
  });
  const copy = (label: string, text: string) =>
    void navigator.clipboard?.writeText(text).then(
      () => setCopied(label),
      () => setCopied(null),
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
    <div className="panel" role="region" aria-label={account.name}>
      <h3>{account.name}</h3>
      <ErrorNote error={patch.error} />
      {patch.isSuccess && <Notice>{t('settings.saved')}</Notice>}
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
      <TestSend account={account} spec={spec} />
      <ChannelLog id={account.id} name={account.name} />
    </div>
  );
}

/** A test message through the account, on one of its channels, with a template where one is needed. */
function TestSend({ account, spec }: { account: Account; spec: Provider }) {
  const { t } = useI18n();
  const [to, setTo] = useState('');
  const [channel, setChannel] = useState(account.channels[0]!);
  const [template, setTemplate] = useState('');
  const templates = useQuery({
    queryKey: ['templates', 'all'],
    queryFn: () =>
      allPages((page) => data(api.GET('/api/templates', { params: { query: { page, per_page: 100 } } }))),
  });
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

/** The event types the API takes (its schema's list): one it adds and this list lacks is a type error below. */
type WebhookEvent = NonNullable<
  operations['postWebhooks']['requestBody']['content']['application/json']['events']
>[number];
const events = [
  'message.delivered',
  'message.failed',
  'message.received',
  'grievance.created',
  'grievance.resolved',
  'payment.processed',
  'channel_account.failed',
  'conversation.created',
  'conversation.assigned',
  'survey.response.completed',
] as const satisfies readonly WebhookEvent[];
const everyEvent: [Exclude<WebhookEvent, (typeof events)[number]>] extends [never] ? true : never = true;
void everyEvent;

function Webhooks() {
  const { t, d } = useI18n();
  const client = useQueryClient();
  const hooks = useQuery({
    queryKey: ['webhooks'],
    queryFn: () =>
      allPages((page) => data(api.GET('/api/webhooks', { params: { query: { page, per_page: 100 } } }))),
  });
  const refresh = () => client.invalidateQueries({ queryKey: ['webhooks'] });
  const [url, setUrl] = useState('');
  const [chosen, setChosen] = useState<string[]>([]);
  const [secret, setSecret] = useState<string | null>(null);
  const [open, setOpen] = useState<number | null>(null);
  const add = useMutation({
    mutationFn: () =>
      data(
        api.POST('/api/webhooks', {
          body: { url, ...(chosen.length ? { events: chosen as (typeof events)[number][] } : {}) },
        }),
      ),
    onSuccess: (hook) => {
      setUrl('');
      setSecret((hook as { secret?: string }).secret ?? null);
      void refresh();
    },
  });
  const toggle = useMutation({
    mutationFn: ({ id, active }: { id: number; active: boolean }) =>
      envelope(api.PATCH('/api/webhooks/{id}', { params: { path: { id } }, body: { active } })),
    onSuccess: refresh,
  });
  const remove = useMutation({
    mutationFn: (id: number) => envelope(api.DELETE('/api/webhooks/{id}', { params: { path: { id } } })),
    onSuccess: refresh,
  });
  return (
    <Section title={t('settings.webhooks')}>
      <ErrorNote error={hooks.error ?? toggle.error ?? remove.error} />
      {hooks.data?.data.length ? (
        <Table caption={t('settings.webhooks')} head={['URL', t('settings.events'), t('field.status'), '']}>
          {hooks.data.data.map((h) => (
            <tr key={h.id}>
              <td>{h.url}</td>
              <td>{h.events.join(', ')}</td>
              <td>
                <Badge value={h.active ? 'active' : 'inactive'} /> {h.disabled_reason}
              </td>
              <td>
                <button type="button" onClick={() => setOpen(open === h.id ? null : h.id)}>
                  {t('settings.deliveries')}
                </button>{' '}
                <button type="button" onClick={() => toggle.mutate({ id: h.id, active: !h.active })}>
                  {h.active ? t('settings.turnOff') : t('settings.turnOn')}
                </button>{' '}
                <button type="button" className="danger" onClick={() => remove.mutate(h.id)}>
                  {t('delete')}
                </button>
              </td>
            </tr>
          ))}
        </Table>
      ) : (
        <Empty>{t('none')}</Empty>
      )}
      {open && <Deliveries id={open} d={d} />}
      <h3>{t('settings.addWebhook')}</h3>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          add.mutate();
        }}
      >
        <Field label="URL">
          <input type="url" required value={url} onChange={(e) => setUrl(e.target.value)} />
        </Field>
        <fieldset>
          <legend>{t('settings.events')}</legend>
          {events.map((ev) => (
            <label key={ev} className="check">
              <input
                type="checkbox"
                checked={chosen.includes(ev)}
                onChange={(e) =>
                  setChosen(e.target.checked ? [...chosen, ev] : chosen.filter((x) => x !== ev))
                }
              />
              <code>{ev}</code>
            </label>
          ))}
        </fieldset>
        <ErrorNote error={add.error} />
        <button className="primary" disabled={add.isPending}>
          {t('add')}
        </button>
      </form>
      {secret && (
        <Notice>
          {t('settings.secretOnce')} <code>{secret}</code>
        </Notice>
      )}
    </Section>
  );
}

function Deliveries({ id, d }: { id: number; d(value: string | null): string }) {
  const { t } = useI18n();
  const client = useQueryClient();
  const log = useQuery({
    queryKey: ['deliveries', id],
    queryFn: () =>
      data(api.GET('/api/webhooks/{id}/deliveries', { params: { path: { id }, query: { per_page: 25 } } })),
  });
  const replay = useMutation({
    mutationFn: (deliveryId: number) =>
      envelope(
        api.POST('/api/webhooks/{id}/deliveries/{delivery_id}/retry', {
          params: { path: { id, delivery_id: deliveryId } },
        }),
      ),
    onSuccess: () => client.invalidateQueries({ queryKey: ['deliveries', id] }),
  });
  return (
    <div>
      <h3>{t('settings.deliveries')}</h3>
      <ErrorNote error={log.error ?? replay.error} />
      {log.data?.data.length ? (
        <Table
          caption={t('settings.deliveries')}
          head={[t('settings.event'), t('field.status'), 'HTTP', t('field.created'), '']}
        >
          {log.data.data.map((x) => (
            <tr key={x.id}>
              <td>{x.event_type}</td>
              <td>
                <Badge value={x.status} />
              </td>
              <td>{x.last_status_code ?? x.last_error}</td>
              <td>{d(x.created_at)}</td>
              <td>
                <button type="button" onClick={() => replay.mutate(x.id)}>
                  {t('settings.replay')}
                </button>
              </td>
            </tr>
          ))}
        </Table>
      ) : (
        <Empty>{t('none')}</Empty>
      )}
    </div>
  );
}

function Credits() {
  const { t, n, d } = useI18n();
  const client = useQueryClient();
  const [page, setPage] = useState(1);
  const ledger = useQuery({
    queryKey: ['ledger', page],
    queryFn: () => data(api.GET('/api/credits/ledger', { params: { query: { page, per_page: 25 } } })),
    placeholderData: keepPreviousData,
  });
  const payments = useQuery({
    queryKey: ['payments'],
    queryFn: () => data(api.GET('/api/payments', { params: { query: { per_page: 25 } } })),
  });
  const [amounts, setAmounts] = useState({ sms_credits: '', whatsapp_credits: '', email_credits: '' });
  const buy = useMutation({
    mutationFn: () =>
      envelope(
        api.POST('/api/payments', {
          body: Object.fromEntries(
            Object.entries(amounts)
              .filter(([, v]) => v !== '')
              .map(([k, v]) => [k, Number(v)]),
          ),
          headers: { 'idempotency-key': crypto.randomUUID() },
        }),
      ),
    onSuccess: () => {
      setAmounts({ sms_credits: '', whatsapp_credits: '', email_credits: '' });
      void client.invalidateQueries({ queryKey: ['ledger'] });
      void client.invalidateQueries({ queryKey: ['payments'] });
    },
  });
  return (
    <>
      <Section title={t('settings.buy')}>
        <p className="muted">{t('settings.buy.note')}</p>
        <form
          className="filters"
          onSubmit={(e) => {
            e.preventDefault();
            buy.mutate();
          }}
        >
          {(['sms_credits', 'whatsapp_credits', 'email_credits'] as const).map((k) => (
            <Field key={k} label={t(`settings.${k}`)}>
              <input
                type="number"
                min={0}
                inputMode="numeric"
                value={amounts[k]}
                onChange={(e) => setAmounts({ ...amounts, [k]: e.target.value })}
              />
            </Field>
          ))}
          <button className="primary" disabled={buy.isPending}>
            {t('settings.pay')}
          </button>
        </form>
        <ErrorNote error={buy.error} />
        {buy.isSuccess && <Notice>{buy.data.message}</Notice>}
        {payments.data?.data.length ? (
          <Table
            caption={t('settings.payments')}
            head={[t('field.created'), 'SMS', 'WhatsApp', t('channel.email'), t('field.status')]}
          >
            {payments.data.data.map((p) => (
              <tr key={p.id}>
                <td>{d(p.created_at)}</td>
                <td>{n(p.sms_credits)}</td>
                <td>{n(p.whatsapp_credits)}</td>
                <td>{n(p.email_credits)}</td>
                <td>
                  <Badge value={p.status} />
                </td>
              </tr>
            ))}
          </Table>
        ) : null}
      </Section>
      <Section title={t('settings.ledger')}>
        <ErrorNote error={ledger.error ?? payments.error} />
        {ledger.data && (
          <>
            <Table
              caption={t('settings.ledger')}
              head={[t('field.created'), t('field.channel'), t('settings.amount'), t('settings.reason')]}
            >
              {ledger.data.data.map((l) => (
                <tr key={l.id}>
                  <td>{d(l.created_at)}</td>
                  <td>{t(`channel.${l.channel}`)}</td>
                  <td className={l.amount < 0 ? 'negative' : undefined}>{n(l.amount)}</td>
                  <td>{t(`reason.${l.reason}`)}</td>
                </tr>
              ))}
            </Table>
            <Pager page={page} lastPage={ledger.data.last_page} onPage={setPage} />
          </>
        )}
      </Section>
    </>
  );
}
