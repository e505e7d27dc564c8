import { useQuery } from '@tanstack/react-query';
import { Link } from 'wouter';
import { api, data } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { ErrorNote, Loading, Notice, Section } from '../ui.tsx';
import type { components } from '../schema.d.ts';
import { queries, useWorkspace } from '../queries.ts';

/** Credits, campaigns sending, the last day's failures by error code, grievances and the inbox at a glance. */
export function Dashboard() {
  const { t, n } = useI18n();
  // The shell's own query of the signed-in user (same key): refreshed every 10 s while the dashboard is open.
  const me = useQuery({ ...queries.me(), refetchInterval: 10_000 });
  const campaigns = useQuery({ ...queries.campaignList({ per_page: 50 }), refetchInterval: 5_000 });
  // New failures show while the office watches, as the campaigns' progress does.
  const failures = useQuery({ ...queries.failures(), refetchInterval: 10_000 });
  const workspace = useWorkspace();
  // Channels only the sandbox carries: their messages reach nobody (Compose and a campaign's page say so too).
  const simulated = workspace.data
    ? (['sms', 'whatsapp', 'email', 'ivr'] as const).filter((c) => workspace.data.channels[c].simulated)
    : [];
  const sending = (campaigns.data?.data ?? []).filter((c) => c.status === 'sending' || c.status === 'queued');
  const credits = me.data?.credits;
  return (
    <>
      <h1>{t('nav.dashboard')}</h1>
      {simulated.length > 0 && (
        <Notice>
          {t('dash.simulated', { channels: simulated.map((c) => t(`channel.${c}`)).join(', ') })}
        </Notice>
      )}
      <div className="grid">
        <Section title={t('dash.credits')}>
          {credits ? (
            <dl className="facts">
              <dt>SMS</dt>
              <dd data-testid="credits-sms">{n(credits.sms_credits)}</dd>
              <dt>WhatsApp</dt>
              <dd>{n(credits.whatsapp_credits)}</dd>
              <dt>{t('channel.email')}</dt>
              <dd>{n(credits.email_credits)}</dd>
            </dl>
          ) : (
            <Loading />
          )}
        </Section>
        <WorkCounts />
      </div>
      <Section title={t('dash.sending')}>
        {sending.length === 0 ? (
          <p className="muted">{t('dash.nothingSending')}</p>
        ) : (
          <ul className="plain">
            {sending.map((c) => {
              const done = c.stats.delivered + c.stats.failed + c.stats.sent;
              return (
                <li key={c.id}>
                  <Link href={`/campaigns/${c.id}`}>{c.name}</Link>{' '}
                  <progress max={Math.max(1, c.total_recipients)} value={done} aria-label={c.name} />{' '}
                  {n(done)} / {n(c.total_recipients)}
                </li>
              );
            })}
          </ul>
        )}
      </Section>
      <Failures failures={failures.data} />
      <ErrorNote error={me.error ?? campaigns.error ?? failures.error} />
    </>
  );
}

/** What waits for the office: open and overdue grievances, unassigned and unread conversations. */
function WorkCounts() {
  const { t, n } = useI18n();
  const open = useQuery(queries.grievanceList({ status: 'open', per_page: 1 }));
  const overdue = useQuery(queries.grievanceList({ overdue: true, per_page: 1 }));
  const unassigned = useQuery(queries.conversationList({ status: 'open', assigned_to: 'none', per_page: 1 }));
  const unread = useQuery(queries.conversationList({ status: 'open', unread: true, per_page: 1 }));
  // Voters' requests under the DPDP Act past their due date (and those still open).
  const requests = useQuery({
    queryKey: ['privacy', 'requests', 'dashboard'],
    queryFn: async () => {
      const [due, late] = await Promise.all(
        [{ status: 'open' as const }, { overdue: true }].map((query) =>
          data(api.GET('/api/privacy/requests', { params: { query: { ...query, per_page: 1 } } })),
        ),
      );
      return { open: due!.total, overdue: late!.total };
    },
  });
  return (
    <>
      <Section title={t('dash.grievances')}>
        <dl className="facts">
          <dt>{t('dash.open')}</dt>
          <dd>{open.data ? n(open.data.total) : '…'}</dd>
          <dt>{t('dash.overdue')}</dt>
          <dd>{overdue.data ? n(overdue.data.total) : '…'}</dd>
        </dl>
        <Link href="/grievances">{t('dash.toGrievances')}</Link>
      </Section>
      <Section title={t('dash.inbox')}>
        <dl className="facts">
          <dt>{t('dash.unassigned')}</dt>
          <dd>{unassigned.data ? n(unassigned.data.total) : '…'}</dd>
          <dt>{t('dash.unread')}</dt>
          <dd>{unread.data ? n(unread.data.total) : '…'}</dd>
        </dl>
        <Link href="/inbox">{t('dash.toInbox')}</Link>
      </Section>
      <Section title={t('privacy.requests')}>
        <dl className="facts">
          <dt>{t('dash.open')}</dt>
          <dd>{requests.data ? n(requests.data.open) : '…'}</dd>
          <dt>{t('dash.overdue')}</dt>
          <dd data-testid="dash-privacy-overdue">{requests.data ? n(requests.data.overdue) : '…'}</dd>
        </dl>
        <Link href="/privacy">{t('nav.privacy')}</Link>
      </Section>
      <ErrorNote error={open.error ?? unassigned.error} />
    </>
  );
}

type FailureCount = components['schemas']['FailureCount'];

/** The sends that failed and the accounts the worker stopped, by error code. */
function Failures({ failures }: { failures: FailureCount[] | undefined }) {
  const { t, n, code } = useI18n();
  return (
    <>
      {(['failed', 'stopped'] as const).map((kind) => {
        const rows = (failures ?? []).filter((f) => f.kind === kind);
        return (
          <Section key={kind} title={t(kind === 'failed' ? 'dash.failures' : 'dash.stopped')}>
            {kind === 'stopped' && <p className="muted">{t('dash.stoppedHelp')}</p>}
            {failures && rows.length === 0 ? (
              <p className="muted">{t(kind === 'failed' ? 'dash.noFailures' : 'dash.noStopped')}</p>
            ) : (
              <ul className="plain" data-testid={`dash-${kind}`}>
                {rows.map(({ error_code, count }) => (
                  <li key={error_code}>
                    {code(error_code)} (<code>{error_code}</code>): {n(count)}
                  </li>
                ))}
              </ul>
            )}
          </Section>
        );
      })}
    </>
  );
}
