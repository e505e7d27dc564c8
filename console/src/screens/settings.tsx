import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, data, envelope } from '../api.ts';
import type { operations } from '../schema.d.ts';
import { useI18n } from '../i18n.tsx';
import { keys, queries, useWorkspace } from '../queries.ts';
import { Badge, Empty, ErrorNote, Field, Notice, Pager, Section, Table } from '../ui.tsx';
import { VoterFieldsSettings } from './voter-fields.tsx';
import { ChannelAccounts } from './settings-accounts.tsx';

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
      void client.invalidateQueries({ queryKey: keys.workspace });
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
        <TimeZoneField value={value} current={workspace.data.timezone} onChange={(z) => setZone(z)} />
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

/** The office's time zone: typed, or one of the zones offices near here use. */
function TimeZoneField({
  value,
  current,
  onChange,
}: {
  value: string;
  current: string;
  onChange: (zone: string) => void;
}) {
  const { t } = useI18n();
  return (
    <>
      <Field label={t('settings.timezone')} hint={t('settings.timezoneHint', { zone: current })}>
        <input
          list="time-zones"
          value={value}
          placeholder={current}
          onChange={(e) => onChange(e.target.value)}
        />
      </Field>
      <datalist id="time-zones">
        {['Asia/Kolkata', 'Asia/Kathmandu', 'Asia/Dhaka', 'Asia/Dubai', 'Europe/London', 'UTC'].map((z) => (
          <option key={z} value={z} />
        ))}
      </datalist>
    </>
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
  'privacy_request.due_soon',
] as const satisfies readonly WebhookEvent[];
const everyEvent: [Exclude<WebhookEvent, (typeof events)[number]>] extends [never] ? true : never = true;
void everyEvent;

function Webhooks() {
  const { t, d } = useI18n();
  const client = useQueryClient();
  const hooks = useQuery(queries.webhooks());
  const refresh = () => client.invalidateQueries({ queryKey: keys.webhooks });
  const [open, setOpen] = useState<number | null>(null);
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
      <AddWebhook refresh={refresh} />
    </Section>
  );
}

/** A new endpoint and the events it takes (all when none is chosen); its secret is shown once. */
function AddWebhook({ refresh }: { refresh: () => Promise<unknown> }) {
  const { t } = useI18n();
  const [url, setUrl] = useState('');
  const [chosen, setChosen] = useState<string[]>([]);
  const [secret, setSecret] = useState<string | null>(null);
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
  return (
    <>
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
    </>
  );
}

function Deliveries({ id, d }: { id: number; d(value: string | null): string }) {
  const { t } = useI18n();
  const client = useQueryClient();
  const log = useQuery(queries.deliveries(id));
  const replay = useMutation({
    mutationFn: (deliveryId: number) =>
      envelope(
        api.POST('/api/webhooks/{id}/deliveries/{delivery_id}/retry', {
          params: { path: { id, delivery_id: deliveryId } },
        }),
      ),
    onSuccess: () => client.invalidateQueries({ queryKey: [...keys.deliveries, id] }),
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
  const payments = useQuery(queries.payments());
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
      void client.invalidateQueries({ queryKey: keys.ledger });
      void client.invalidateQueries({ queryKey: keys.payments });
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
        <ErrorNote error={buy.error ?? payments.error} />
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
      <Ledger />
    </>
  );
}

/** The credit ledger: every grant, reservation, charge and refund, newest first. */
function Ledger() {
  const { t, n, d } = useI18n();
  const [page, setPage] = useState(1);
  const ledger = useQuery(queries.ledger(page));
  return (
    <Section title={t('settings.ledger')}>
      <ErrorNote error={ledger.error} />
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
  );
}
