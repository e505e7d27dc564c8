// Composing a campaign: its audience, its text or template, its carrier, a preview, and sending or scheduling it.
import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { Link, useLocation } from 'wouter';
import { api, data, envelope } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { useMe } from '../me.ts';
import { ErrorNote, Field, Notice, Section } from '../ui.tsx';
import { keys, queries, useWorkspace } from '../queries.ts';
import { type Channel, channels } from './campaigns.tsx';

/**
 * Compose: channel, segment or recipients, a template (its text rendered for a sample voter of the segment) or a
 * message, schedule. Saving makes a draft and shows the compliance preview (who is skipped or held and why,
 * what it costs); then send now or keep it scheduled.
 */
export function Compose() {
  const { t, n, d, fromLocal, zoneName } = useI18n();
  const [, navigate] = useLocation();
  const client = useQueryClient();
  const [name, setName] = useState('');
  const [channel, setChannel] = useState<Channel>('sms');
  const [audience, setAudience] = useState<'segment' | 'recipients'>('segment');
  const [segmentId, setSegmentId] = useState('');
  const [recipients, setRecipients] = useState('');
  const [templateId, setTemplateId] = useState('');
  const [message, setMessage] = useState('');
  const [subject, setSubject] = useState('');
  const [scheduledAt, setScheduledAt] = useState('');
  const [accountId, setAccountId] = useState('');
  /** The draft this form saves into (re-checked any number of times), and the channel it was made for. */
  const [draft, setDraft] = useState<{ id: string; channel: Channel } | null>(null);
  const draftId = draft?.id ?? null;
  // What carries each channel now (every member may read it); the accounts themselves only a politician lists.
  const workspace = useWorkspace();
  const politician = useMe().user.role === 'politician';
  const accounts = useQuery({ ...queries.channelAccounts(), enabled: politician });
  const usable = (accounts.data?.data ?? []).filter((a) => a.active && a.channels.includes(channel));
  const carrier = workspace.data?.channels[channel];
  const segments = useQuery(queries.segments());
  const templates = useQuery(queries.templates());
  const segment = segments.data?.data.find((s) => String(s.id) === segmentId);
  const sample = useQuery({
    ...queries.voterList({ ...(segment?.filters ?? {}), per_page: 1 }),
    enabled: audience === 'segment' && !!segment,
  });
  const template = templates.data?.data.find((tpl) => tpl.id === templateId);
  const text = template ? template.body : message;
  // The service renders it (one renderer: what it sends is what this shows), a moment after typing stops.
  const [typed, setTyped] = useState(message);
  useEffect(() => {
    const timer = setTimeout(() => setTyped(message), 250);
    return () => clearTimeout(timer);
  }, [message]);
  const voterId = sample.data?.data[0]?.id;
  const rendering = useQuery({
    ...queries.render({
      ...(template ? { template_id: template.id } : { body: typed, channel }),
      ...(voterId !== undefined ? { voter_id: Number(voterId) } : {}),
    }),
    enabled: template !== undefined || typed.trim() !== '',
    placeholderData: keepPreviousData,
  });
  const rendered = text ? (rendering.data?.text ?? '') : '';
  const parts = rendering.data?.sms_parts ?? 1;

  const list = () =>
    recipients
      .split(/[,;\n]+/)
      .map((r) => r.trim())
      .filter(Boolean);
  // Saving never schedules: "Schedule" below does, after the check.
  const fields = () => ({
    name,
    ...(template ? { template_id: template.id } : { message }),
    ...(accountId ? { channel_account_id: accountId } : {}),
  });
  const save = useMutation({
    mutationFn: async () => {
      let id = draftId;
      // The same draft is saved again (its channel cannot change: a new channel is a new draft, the old one goes).
      if (id && draft?.channel !== channel) {
        await envelope(api.DELETE('/api/campaigns/{id}', { params: { path: { id } } })).catch(
          () => undefined,
        );
        id = null;
      }
      if (id) {
        await data(
          api.PATCH('/api/campaigns/{id}', {
            params: { path: { id } },
            body: {
              ...fields(),
              ...(template ? { message: undefined } : { template_id: null }),
              ...(audience === 'segment'
                ? { segment_id: segmentId, recipients: null }
                : { recipients: list(), segment_id: null }),
              subject: channel === 'email' && subject ? subject : null,
              channel_account_id: accountId || null,
            },
          }),
        );
      } else {
        const made = await data(
          api.POST('/api/campaigns', {
            body: {
              ...fields(),
              channel,
              ...(audience === 'segment' ? { segment_id: segmentId } : { recipients: list() }),
              ...(channel === 'email' && subject ? { subject } : {}),
            },
          }),
        );
        id = made.id;
        setDraft({ id, channel });
      }
      // Evaluated at the "Send at" typed (in the office's zone), else now: the preview is the send.
      const at = scheduledAt ? fromLocal(scheduledAt) : '';
      return data(
        api.POST('/api/campaigns/{id}/preview', {
          params: { path: { id }, query: at ? { at } : {} },
        }),
      );
    },
  });
  const schedule = useMutation({
    mutationFn: () =>
      envelope(
        api.PATCH('/api/campaigns/{id}', {
          params: { path: { id: draftId! } },
          body: { scheduled_at: fromLocal(scheduledAt) },
        }),
      ),
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: keys.campaigns });
      navigate(`/campaigns/${draftId}`);
    },
  });
  const send = useMutation({
    mutationFn: () => envelope(api.POST('/api/campaigns/{id}/send', { params: { path: { id: draftId! } } })),
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: keys.campaigns });
      navigate(`/campaigns/${draftId}`);
    },
  });
  const preview = save.data;
  return (
    <>
      <h1>{t('campaigns.new')}</h1>
      <Section title={t('compose.what')}>
        <form
          className="form-grid"
          onSubmit={(e) => {
            e.preventDefault();
            save.mutate();
          }}
        >
          <Field label={t('field.name')}>
            <input required value={name} onChange={(e) => setName(e.target.value)} />
          </Field>
          <Field label={t('field.channel')}>
            <select
              value={channel}
              onChange={(e) => {
                setChannel(e.target.value as Channel);
                setAccountId('');
              }}
            >
              {channels.map((c) => (
                <option key={c} value={c}>
                  {t(`channel.${c}`)}
                </option>
              ))}
            </select>
          </Field>
          {usable.length > 0 && (
            <Field label={t('compose.account')} hint={t('compose.account.hint')}>
              <select value={accountId} onChange={(e) => setAccountId(e.target.value)}>
                <option value="">{t('compose.account.default')}</option>
                {usable.map((a) => (
                  <option key={a.id} value={a.id}>
                    {a.name}
                  </option>
                ))}
              </select>
            </Field>
          )}
          {carrier && !accountId && (
            <p
              className={carrier.simulated ? 'error' : 'muted'}
              role={carrier.simulated ? 'alert' : undefined}
            >
              {carrier.simulated
                ? t('compose.simulated')
                : t('compose.carrier', { provider: carrier.provider })}
            </p>
          )}
          <Field label={t('compose.audience')}>
            <select
              value={audience}
              onChange={(e) => setAudience(e.target.value as 'segment' | 'recipients')}
            >
              <option value="segment">{t('compose.segment')}</option>
              <option value="recipients">{t('compose.recipients')}</option>
            </select>
          </Field>
          {audience === 'segment' ? (
            <Field label={t('compose.segment')}>
              <select required value={segmentId} onChange={(e) => setSegmentId(e.target.value)}>
                <option value="">{t('compose.choose')}</option>
                {segments.data?.data.map((s) => (
                  <option key={s.id} value={s.id}>
                    {s.name}
                  </option>
                ))}
              </select>
            </Field>
          ) : (
            <Field label={t('compose.recipients')} hint={t('compose.recipients.hint')}>
              <textarea
                required
                rows={3}
                value={recipients}
                onChange={(e) => setRecipients(e.target.value)}
              />
            </Field>
          )}
          <Field label={t('compose.template')} hint={t('compose.variablesHint')}>
            <select value={templateId} onChange={(e) => setTemplateId(e.target.value)}>
              <option value="">{t('compose.noTemplate')}</option>
              {templates.data?.data
                .filter((tpl) => tpl.channel === channel)
                .map((tpl) => (
                  <option key={tpl.id} value={tpl.id}>
                    {tpl.name}
                  </option>
                ))}
            </select>
          </Field>
          {!template && (
            <Field label={t('field.message')}>
              <textarea required rows={4} value={message} onChange={(e) => setMessage(e.target.value)} />
            </Field>
          )}
          {channel === 'email' && (
            <Field label={t('compose.subject')}>
              <input value={subject} onChange={(e) => setSubject(e.target.value)} />
            </Field>
          )}
          <Field
            label={t('compose.schedule')}
            hint={`${t('compose.schedule.hint')} ${t('time.inZone', { zone: zoneName })}`}
          >
            <input
              type="datetime-local"
              value={scheduledAt}
              onChange={(e) => setScheduledAt(e.target.value)}
            />
          </Field>
          {text && (
            <div className="sample">
              <h3>{t('compose.sample')}</h3>
              <p data-testid="rendered">{rendered}</p>
              {channel === 'sms' && (
                <small>{parts === 1 ? t('compose.part') : t('compose.parts', { parts: n(parts) })}</small>
              )}
            </div>
          )}
          <ErrorNote error={save.error} />
          <div className="actions">
            <button className="primary" disabled={save.isPending}>
              {t('compose.preview')}
            </button>
          </div>
        </form>
      </Section>
      {preview && (
        <Section title={t('compose.previewTitle')}>
          <dl className="facts" data-testid="preview">
            <dt>{t('preview.total')}</dt>
            <dd>{n(preview.total_recipients)}</dd>
            <dt>{t('preview.toSend')}</dt>
            <dd>{n(preview.to_send)}</dd>
            <dt>{t('preview.optedOut')}</dt>
            <dd>{n(preview.opted_out)}</dd>
            <dt>{t('preview.silence')}</dt>
            <dd>{n(preview.silence_period)}</dd>
            <dt>{t('preview.held')}</dt>
            <dd>{n(preview.held)}</dd>
            <dt>{t('preview.noAddress')}</dt>
            <dd>{n(preview.skipped_no_address)}</dd>
            <dt>{t('preview.credits')}</dt>
            <dd>{n(preview.estimated_credits)}</dd>
            <dt>{t('preview.reserve')}</dt>
            <dd>{n(preview.credits_to_reserve)}</dd>
            {preview.credits_available !== null && (
              <>
                <dt>{t('preview.availableLabel')}</dt>
                <dd>{n(preview.credits_available)}</dd>
              </>
            )}
          </dl>
          {preview.credits_available !== null && preview.credits_to_reserve > preview.credits_available && (
            <div className="error" role="alert">
              <p>
                {t('preview.short', {
                  needed: n(preview.credits_to_reserve),
                  available: n(preview.credits_available),
                })}
              </p>
            </div>
          )}
          {preview.held_until && <Notice>{t('preview.heldUntil', { when: d(preview.held_until) })}</Notice>}
          <ErrorNote error={send.error ?? schedule.error} />
          <div className="actions">
            <button type="button" className="primary" disabled={send.isPending} onClick={() => send.mutate()}>
              {t('compose.sendNow')}
            </button>
            {scheduledAt && (
              <button type="button" disabled={schedule.isPending} onClick={() => schedule.mutate()}>
                {t('compose.scheduleAt', { when: d(fromLocal(scheduledAt)) })}
              </button>
            )}
            <Link href={`/campaigns/${draftId}`} className="button">
              {t('compose.keepDraft')}
            </Link>
          </div>
        </Section>
      )}
    </>
  );
}
