import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { api, envelope } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { Badge, Empty, ErrorNote, Loading, Notice, Pager, Section, Table } from '../ui.tsx';
import type { components } from '../schema.d.ts';
import { keys, queries, useProviders } from '../queries.ts';

export const channels = ['sms', 'whatsapp', 'email', 'ivr'] as const;
export type Channel = (typeof channels)[number];

/** Whether a provider reports deliveries (a mail server does not: `sent` is final there). */
function useReports() {
  const providers = useProviders();
  return (provider: string | null) =>
    providers.data?.find((p) => p.name === provider)?.delivery_reports !== false;
}

/** Campaigns, newest first, with their live counts. */
export function Campaigns() {
  const { t, n, d } = useI18n();
  const reports = useReports();
  const [page, setPage] = useState(1);
  const list = useQuery({ ...queries.campaigns(page), refetchInterval: 5_000 });
  return (
    <>
      <div className="page-head">
        <h1>{t('nav.campaigns')}</h1>
        <Link href="/campaigns/new" className="button primary">
          {t('campaigns.new')}
        </Link>
      </div>
      <ErrorNote error={list.error} />
      {list.isPending ? (
        <Loading />
      ) : list.data?.data.length === 0 ? (
        <Empty>{t('campaigns.none')}</Empty>
      ) : (
        <>
          <Table
            caption={t('nav.campaigns')}
            head={[
              t('field.name'),
              t('field.channel'),
              t('field.status'),
              t('campaigns.delivered'),
              t('field.created'),
            ]}
          >
            {list.data?.data.map((c) => (
              <tr key={c.id}>
                <td>
                  <Link href={`/campaigns/${c.id}`}>{c.name}</Link>
                </td>
                <td>{t(`channel.${c.channel}`)}</td>
                <td>
                  <Badge value={c.status} />
                </td>
                <td>
                  {reports(c.provider)
                    ? `${n(c.stats.delivered)} / ${n(c.total_recipients)}`
                    : `${n(c.stats.sent + c.stats.delivered)} / ${n(c.total_recipients)} ${t('campaigns.sentFinal')}`}
                </td>
                <td>{d(c.created_at)}</td>
              </tr>
            ))}
          </Table>
          <Pager page={page} lastPage={list.data?.last_page ?? 1} onPage={setPage} />
        </>
      )}
    </>
  );
}

/** One campaign: live progress, its failed messages, retry and cancel. */
export function CampaignPage({ id }: { id: string }) {
  const { t, d, code } = useI18n();
  const reports = useReports();
  const campaign = useQuery({
    ...queries.campaign(id),
    // Every second while it sends; then every 2 s while messages still wait for their delivery reports.
    refetchInterval: (q) => {
      const c = q.state.data;
      if (['queued', 'sending', 'scheduled'].includes(c?.status ?? '')) return 1_000;
      return c && c.stats.sent > 0 && reports(c.provider) ? 2_000 : false;
    },
  });
  const c = campaign.data;
  const failed = useQuery({
    ...queries.campaignFailed(id, c?.stats.failed),
    enabled: !!c && c.stats.failed > 0,
  });
  if (campaign.isPending) return <Loading />;
  if (!c) return <ErrorNote error={campaign.error} />;
  const final = !reports(c.provider);
  const done = c.stats.delivered + c.stats.failed + (final ? c.stats.sent : 0);
  return (
    <>
      <div className="page-head">
        <h1>{c.name}</h1>
        <Badge value={c.status} />
      </div>
      {c.simulated && (
        <p className="error" role="alert">
          {t('campaign.simulated')}
        </p>
      )}
      {c.last_error && (
        <p className="error" data-testid="last-error">
          {t('campaign.lastError', { when: d(c.last_error.at) })} {code(c.last_error.error_code)} (
          <code>{c.last_error.error_code}</code>) {c.last_error.error_message}
        </p>
      )}
      <Section title={t('campaign.progress')}>
        <progress max={Math.max(1, c.total_recipients)} value={done} aria-label={t('campaign.progress')} />
        <CampaignFacts c={c} final={final} />
        <p className="message-text">{c.message}</p>
        <CampaignActions id={id} c={c} />
      </Section>
      {c.stats.failed > 0 && (
        <Section title={t('campaign.failed')}>
          <Table caption={t('campaign.failed')} head={[t('field.to'), t('field.error'), t('field.created')]}>
            {failed.data?.data.map((m) => (
              <tr key={m.id}>
                <td>{m.to}</td>
                <td>
                  {code(m.error_code)} (<code>{m.error_code}</code>) {m.error_message}
                </td>
                <td>{d(m.updated_at)}</td>
              </tr>
            ))}
          </Table>
        </Section>
      )}
    </>
  );
}

type Campaign = components['schemas']['Campaign'];

/** The campaign's counts, channel, provider, schedule and hold. */
function CampaignFacts({ c, final }: { c: Campaign; final: boolean }) {
  const { t, n, d } = useI18n();
  return (
    <dl className="facts" data-testid="campaign-stats">
      <dt>{t('preview.total')}</dt>
      <dd>{n(c.total_recipients)}</dd>
      <dt>{t('status.queued')}</dt>
      <dd>{n(c.stats.queued)}</dd>
      <dt>{t('status.sent')}</dt>
      <dd>{n(c.stats.sent)}</dd>
      <dt>{t('status.delivered')}</dt>
      <dd data-testid="delivered">{n(c.stats.delivered)}</dd>
      <dt>{t('status.failed')}</dt>
      <dd>{n(c.stats.failed)}</dd>
      <dt>{t('field.channel')}</dt>
      <dd>{t(`channel.${c.channel}`)}</dd>
      <dt>{t('campaign.provider')}</dt>
      <dd data-testid="provider">
        {c.provider}
        {final && <small className="muted"> {t('campaign.noReports')}</small>}
      </dd>
      {c.scheduled_at && (
        <>
          <dt>{t('compose.schedule')}</dt>
          <dd>{d(c.scheduled_at)}</dd>
        </>
      )}
      {c.held_reason && (
        <>
          <dt>{t('preview.held')}</dt>
          <dd>
            {c.held_reason} {d(c.held_until)}
          </dd>
        </>
      )}
    </dl>
  );
}

/** Send now, cancel, or send the failed ones again. */
function CampaignActions({ id, c }: { id: string; c: Campaign }) {
  const { t } = useI18n();
  const client = useQueryClient();
  const refresh = () => client.invalidateQueries({ queryKey: [...keys.campaign, id] });
  const send = useMutation({
    mutationFn: () => envelope(api.POST('/api/campaigns/{id}/send', { params: { path: { id } } })),
    onSuccess: refresh,
  });
  const cancel = useMutation({
    mutationFn: () => envelope(api.POST('/api/campaigns/{id}/cancel', { params: { path: { id } } })),
    onSuccess: refresh,
  });
  const retry = useMutation({
    mutationFn: () => envelope(api.POST('/api/campaigns/{id}/retry-failed', { params: { path: { id } } })),
    onSuccess: refresh,
  });
  return (
    <>
      <ErrorNote error={send.error ?? cancel.error ?? retry.error} />
      <div className="actions">
        {(c.status === 'draft' || c.status === 'scheduled') && (
          <button type="button" className="primary" onClick={() => send.mutate()}>
            {t('compose.sendNow')}
          </button>
        )}
        {['scheduled', 'queued', 'sending'].includes(c.status) && (
          <button
            type="button"
            className="danger"
            onClick={() => window.confirm(t('campaign.confirmCancel')) && cancel.mutate()}
          >
            {t('campaign.cancel')}
          </button>
        )}
        {(c.status === 'completed' || c.status === 'cancelled') && c.stats.failed > 0 && (
          <button type="button" onClick={() => retry.mutate()}>
            {t('campaign.retry')}
          </button>
        )}
      </div>
      {retry.isSuccess && <Notice>{retry.data.message}</Notice>}
    </>
  );
}
