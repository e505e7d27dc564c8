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
/** What the compose form holds. */
interface ComposeForm {
  name: string;
  channel: Channel;
  audience: 'segment' | 'recipients';
  segmentId: string;
  recipients: string;
  templateId: string;
  message: string;
  subject: string;
  /** "Send at", as typed (the office's local time). */
  scheduledAt: string;
  accountId: string;
}

type SetField = <K extends keyof ComposeForm>(key: K, value: ComposeForm[K]) => void;

const blankForm: ComposeForm = {
  name: '',
  channel: 'sms',
  audience: 'segment',
  segmentId: '',
  recipients: '',
  templateId: '',
  message: '',
  subject: '',
  scheduledAt: '',
  accountId: '',
};

type Template = NonNullable<ReturnType<typeof useTemplates>['data']>['data'][number];
type Preview = ReturnType<typeof useDraftPreview>['data'];

function useTemplates() {
  return useQuery(queries.templates());
}

export function Compose() {
  const { t, fromLocal } = useI18n();
  const [, navigate] = useLocation();
  const client = useQueryClient();
  const [form, setForm] = useState<ComposeForm>(blankForm);
  const set: SetField = (key, value) => setForm((f) => ({ ...f, [key]: value }));
  const templates = useTemplates();
  const template = templates.data?.data.find((tpl) => tpl.id === form.templateId);
  const save = useDraftPreview(form, template);
  const draftId = save.draftId;
  const after = {
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: keys.campaigns });
      navigate(`/campaigns/${draftId}`);
    },
  };
  const schedule = useMutation({
    mutationFn: () =>
      envelope(
        api.PATCH('/api/campaigns/{id}', {
          params: { path: { id: draftId! } },
          body: { scheduled_at: fromLocal(form.scheduledAt) },
        }),
      ),
    ...after,
  });
  const send = useMutation({
    mutationFn: () => envelope(api.POST('/api/campaigns/{id}/send', { params: { path: { id: draftId! } } })),
    ...after,
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
            <input required value={form.name} onChange={(e) => set('name', e.target.value)} />
          </Field>
          <CarrierFields form={form} set={set} />
          <AudienceFields form={form} set={set} />
          <MessageFields form={form} set={set} templates={templates.data?.data ?? []} template={template} />
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
          <PreviewFacts preview={preview} />
          <ErrorNote error={send.error ?? schedule.error} />
          <div className="actions">
            <button type="button" className="primary" disabled={send.isPending} onClick={() => send.mutate()}>
              {t('compose.sendNow')}
            </button>
            {form.scheduledAt && <ScheduleButton at={form.scheduledAt} schedule={schedule} />}
            <Link href={`/campaigns/${draftId}`} className="button">
              {t('compose.keepDraft')}
            </Link>
          </div>
        </Section>
      )}
    </>
  );
}

function ScheduleButton({
  at,
  schedule,
}: {
  at: string;
  schedule: { isPending: boolean; mutate: () => void };
}) {
  const { t, d, fromLocal } = useI18n();
  return (
    <button type="button" disabled={schedule.isPending} onClick={() => schedule.mutate()}>
      {t('compose.scheduleAt', { when: d(fromLocal(at)) })}
    </button>
  );
}

/**
 * Saves the form into its draft (made at the first save; a new channel is a new draft, the old one goes) and
 * previews it at the "Send at" typed (in the office's zone), else now: the preview is the send. Saving never
 * schedules: "Schedule" does, after the check.
 */
function useDraftPreview(form: ComposeForm, template: { id: string } | undefined) {
  const { fromLocal } = useI18n();
  /** The draft this form saves into (re-checked any number of times), and the channel it was made for. */
  const [draft, setDraft] = useState<{ id: string; channel: Channel } | null>(null);
  const { name, channel, audience, segmentId, message, subject, accountId, scheduledAt } = form;
  const list = () =>
    form.recipients
      .split(/[,;\n]+/)
      .map((r) => r.trim())
      .filter(Boolean);
  const fields = () => ({
    name,
    ...(template ? { template_id: template.id } : { message }),
    ...(accountId ? { channel_account_id: accountId } : {}),
  });
  const save = useMutation({
    mutationFn: async () => {
      let id = draft?.id ?? null;
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
      const at = scheduledAt ? fromLocal(scheduledAt) : '';
      return data(
        api.POST('/api/campaigns/{id}/preview', {
          params: { path: { id }, query: at ? { at } : {} },
        }),
      );
    },
  });
  return { ...save, draftId: draft?.id ?? null };
}

/** The channel, and the account that carries it (the workspace's default unless one is chosen). */
function CarrierFields({ form, set }: { form: ComposeForm; set: SetField }) {
  const { t } = useI18n();
  // What carries each channel now (every member may read it); the accounts themselves only a politician lists.
  const workspace = useWorkspace();
  const politician = useMe().user.role === 'politician';
  const accounts = useQuery({ ...queries.channelAccounts(), enabled: politician });
  const usable = (accounts.data?.data ?? []).filter((a) => a.active && a.channels.includes(form.channel));
  const carrier = workspace.data?.channels[form.channel];
  return (
    <>
      <Field label={t('field.channel')}>
        <select
          value={form.channel}
          onChange={(e) => {
            set('channel', e.target.value as Channel);
            set('accountId', '');
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
          <select value={form.accountId} onChange={(e) => set('accountId', e.target.value)}>
            <option value="">{t('compose.account.default')}</option>
            {usable.map((a) => (
              <option key={a.id} value={a.id}>
                {a.name}
              </option>
            ))}
          </select>
        </Field>
      )}
      {carrier && !form.accountId && (
        <p className={carrier.simulated ? 'error' : 'muted'} role={carrier.simulated ? 'alert' : undefined}>
          {carrier.simulated ? t('compose.simulated') : t('compose.carrier', { provider: carrier.provider })}
        </p>
      )}
    </>
  );
}

/** A segment, or a list of recipients. */
function AudienceFields({ form, set }: { form: ComposeForm; set: SetField }) {
  const { t } = useI18n();
  const segments = useQuery(queries.segments());
  return (
    <>
      <Field label={t('compose.audience')}>
        <select
          value={form.audience}
          onChange={(e) => set('audience', e.target.value as 'segment' | 'recipients')}
        >
          <option value="segment">{t('compose.segment')}</option>
          <option value="recipients">{t('compose.recipients')}</option>
        </select>
      </Field>
      {form.audience === 'segment' ? (
        <Field label={t('compose.segment')}>
          <select required value={form.segmentId} onChange={(e) => set('segmentId', e.target.value)}>
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
            value={form.recipients}
            onChange={(e) => set('recipients', e.target.value)}
          />
        </Field>
      )}
    </>
  );
}

/** A template or a message, a subject for email, "Send at", and the text as a sample voter of the segment gets it. */
function MessageFields({
  form,
  set,
  templates,
  template,
}: {
  form: ComposeForm;
  set: SetField;
  templates: Template[];
  template: Template | undefined;
}) {
  const { t, n, zoneName } = useI18n();
  const { rendered, parts } = useRendered(form, template);
  const text = template ? template.body : form.message;
  return (
    <>
      <Field label={t('compose.template')} hint={t('compose.variablesHint')}>
        <select value={form.templateId} onChange={(e) => set('templateId', e.target.value)}>
          <option value="">{t('compose.noTemplate')}</option>
          {templates
            .filter((tpl) => tpl.channel === form.channel)
            .map((tpl) => (
              <option key={tpl.id} value={tpl.id}>
                {tpl.name}
              </option>
            ))}
        </select>
      </Field>
      {!template && (
        <Field label={t('field.message')}>
          <textarea required rows={4} value={form.message} onChange={(e) => set('message', e.target.value)} />
        </Field>
      )}
      {form.channel === 'email' && (
        <Field label={t('compose.subject')}>
          <input value={form.subject} onChange={(e) => set('subject', e.target.value)} />
        </Field>
      )}
      <Field
        label={t('compose.schedule')}
        hint={`${t('compose.schedule.hint')} ${t('time.inZone', { zone: zoneName })}`}
      >
        <input
          type="datetime-local"
          value={form.scheduledAt}
          onChange={(e) => set('scheduledAt', e.target.value)}
        />
      </Field>
      {text && (
        <div className="sample">
          <h3>{t('compose.sample')}</h3>
          <p data-testid="rendered">{text ? rendered : ''}</p>
          {form.channel === 'sms' && (
            <small>{parts === 1 ? t('compose.part') : t('compose.parts', { parts: n(parts) })}</small>
          )}
        </div>
      )}
    </>
  );
}

/**
 * The text as the service renders it (one renderer: what it sends is what this shows) for a sample voter of
 * the segment, a moment after typing stops, and its SMS parts.
 */
function useRendered(form: ComposeForm, template: Template | undefined) {
  const segments = useQuery(queries.segments());
  const segment = segments.data?.data.find((s) => String(s.id) === form.segmentId);
  const sample = useQuery({
    ...queries.voterList({ ...(segment?.filters ?? {}), per_page: 1 }),
    enabled: form.audience === 'segment' && !!segment,
  });
  const [typed, setTyped] = useState(form.message);
  useEffect(() => {
    const timer = setTimeout(() => setTyped(form.message), 250);
    return () => clearTimeout(timer);
  }, [form.message]);
  const voterId = sample.data?.data[0]?.id;
  const rendering = useQuery({
    ...queries.render({
      ...(template ? { template_id: template.id } : { body: typed, channel: form.channel }),
      ...(voterId !== undefined ? { voter_id: Number(voterId) } : {}),
    }),
    enabled: template !== undefined || typed.trim() !== '',
    placeholderData: keepPreviousData,
  });
  return { rendered: rendering.data?.text ?? '', parts: rendering.data?.sms_parts ?? 1 };
}

/** The compliance preview: who is skipped or held and why, what it costs, and whether the credits suffice. */
function PreviewFacts({ preview }: { preview: NonNullable<Preview> }) {
  const { t, n, d } = useI18n();
  const short = preview.credits_available !== null && preview.credits_to_reserve > preview.credits_available;
  return (
    <>
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
      {short && (
        <div className="error" role="alert">
          <p>
            {t('preview.short', {
              needed: n(preview.credits_to_reserve),
              available: n(preview.credits_available ?? 0),
            })}
          </p>
        </div>
      )}
      {preview.held_until && <Notice>{t('preview.heldUntil', { when: d(preview.held_until) })}</Notice>}
    </>
  );
}
