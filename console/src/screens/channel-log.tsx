import { queryOptions, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api, data } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { Empty, ErrorNote, Loading, Table } from '../ui.tsx';
import { keys } from '../queries.ts';

/** GET /api/channel-accounts/{id}/log: the account's newest exchanges with its provider. */
export const channelLogQuery = (id: string) =>
  queryOptions({
    queryKey: [...keys.channelLog, id],
    queryFn: () =>
      data(api.GET('/api/channel-accounts/{id}/log', { params: { path: { id }, query: { per_page: 25 } } })),
    // Open, it follows new exchanges without a reload.
    refetchInterval: 10_000,
  });

/**
 * An account's channel log, under its panel in Settings: why a provider refused (its status and answer), what was
 * sent (redacted by the service), and the provider's calls back. Read only when opened.
 */
export function ChannelLog({ id, name }: { id: string; name: string }) {
  const { t, d, n, code } = useI18n();
  const [open, setOpen] = useState(false);
  const log = useQuery({ ...channelLogQuery(id), enabled: open });
  const head = [t('log.when'), t('log.what'), 'HTTP', t('log.duration'), t('log.exchange')];
  return (
    <details onToggle={(e) => setOpen((e.target as HTMLDetailsElement).open)}>
      <summary>{t('log.title')}</summary>
      <p className="muted">{t('log.help')}</p>
      <ErrorNote error={log.error} />
      {!log.data ? (
        open && <Loading />
      ) : log.data.data.length === 0 ? (
        <Empty>{t('log.empty')}</Empty>
      ) : (
        <Table caption={t('log.caption', { name })} head={head} stacked>
          {log.data.data.map((x) => (
            <tr key={x.id}>
              <td data-label={head[0]}>{d(x.at)}</td>
              <td data-label={head[1]}>
                {t(`log.dir.${x.direction}`)} · {t(`log.kind.${x.kind}`)}
                {x.error_code ? ` · ${code(x.error_code)}` : ''}
              </td>
              <td data-label={head[2]}>{x.status ?? t('log.noAnswer')}</td>
              <td data-label={head[3]}>{x.duration_ms === null ? '' : `${n(x.duration_ms)} ms`}</td>
              <td data-label={head[4]}>
                <details>
                  <summary>
                    {x.method} {x.url}
                  </summary>
                  <p>{t('log.request')}</p>
                  <pre className="log-body">{x.request || '—'}</pre>
                  <p>{t('log.response')}</p>
                  <pre className="log-body">{x.response || '—'}</pre>
                </details>
              </td>
            </tr>
          ))}
        </Table>
      )}
    </details>
  );
}
