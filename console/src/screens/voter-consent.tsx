// A voter's DPDP consent on their page: what was recorded, how, when and under which notice; the office records a change.
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { api, envelope } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { keys } from '../queries.ts';
import type { components } from '../schema.d.ts';
import { ErrorNote, Section } from '../ui.tsx';

type Voter = components['schemas']['Voter'];

/** The voter's DPDP consent: what was recorded, how and when; the office records a change it was told of. */
export function VoterConsent({ v }: { v: Voter }) {
  const { t, d } = useI18n();
  const client = useQueryClient();
  const record = useMutation({
    mutationFn: (consent: 'given' | 'withdrawn') =>
      envelope(api.PUT('/api/voters/{id}', { params: { path: { id: v.id } }, body: { consent } })),
    onSuccess: () => void client.invalidateQueries({ queryKey: keys.voter }),
  });
  const c = v.consent;
  const status = t(`consent.status.${c.status}`);
  return (
    <Section title={t('consent.label')}>
      <p data-testid="voter-consent">
        {c.status === 'unknown'
          ? status
          : t('consent.detail', {
              status,
              source: c.source ? t(`consent.source.${c.source}`) : '—',
              when: d(c.at),
              version: c.notice_version ?? '—',
            })}
      </p>
      <div className="actions">
        {c.status !== 'given' && (
          <button type="button" onClick={() => record.mutate('given')}>
            {t('consent.give')}
          </button>
        )}
        {c.status !== 'withdrawn' && (
          <button type="button" onClick={() => record.mutate('withdrawn')}>
            {t('consent.withdraw')}
          </button>
        )}
      </div>
      <ErrorNote error={record.error} />
    </Section>
  );
}
