import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, envelope } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { useMe } from '../me.ts';
import { ErrorNote, Field, Loading, Notice, Section, Table } from '../ui.tsx';
import { keys, queries } from '../queries.ts';

/** The member's own page: who they are, their sessions (sign one out), their password. */
export function Profile() {
  const { t, d } = useI18n();
  const me = useMe();
  const client = useQueryClient();
  const tokens = useQuery(queries.tokens());
  const revoke = useMutation({
    mutationFn: (id: number) => envelope(api.DELETE('/api/user/tokens/{id}', { params: { path: { id } } })),
    onSuccess: () => client.invalidateQueries({ queryKey: keys.tokens }),
  });
  return (
    <>
      <h1>{t('nav.profile')}</h1>
      <Section title={me.user.name}>
        <dl className="facts">
          <dt>{t('field.email')}</dt>
          <dd>{me.user.email}</dd>
          <dt>{t('field.phone')}</dt>
          <dd>{me.user.phone ?? '—'}</dd>
          <dt>{t('field.role')}</dt>
          <dd>{t(`role.${me.user.role}`)}</dd>
        </dl>
      </Section>
      <Section title={t('profile.sessions')}>
        {tokens.isPending ? (
          <Loading />
        ) : (
          <Table
            caption={t('profile.sessions')}
            head={[t('field.created'), t('profile.lastUsed'), t('profile.expires'), '']}
          >
            {(tokens.data?.data ?? []).map((token) => (
              <tr key={token.id}>
                <td>{d(token.created_at)}</td>
                <td>{d(token.last_used_at)}</td>
                <td>{d(token.expires_at)}</td>
                <td>
                  {token.current ? (
                    t('profile.thisSession')
                  ) : (
                    <button type="button" onClick={() => revoke.mutate(token.id)}>
                      {t('profile.signOutSession')}
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </Table>
        )}
        <ErrorNote error={tokens.error ?? revoke.error} />
      </Section>
      <ChangePassword />
    </>
  );
}

/** A new password, given the current one. */
function ChangePassword() {
  const { t } = useI18n();
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const change = useMutation({
    mutationFn: () =>
      envelope(api.POST('/api/user/password', { body: { current_password: current, password: next } })),
    onSuccess: () => {
      setCurrent('');
      setNext('');
    },
  });
  return (
    <Section title={t('profile.password')}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          change.mutate();
        }}
      >
        <Field label={t('profile.currentPassword')}>
          <input
            type="password"
            autoComplete="current-password"
            required
            value={current}
            onChange={(e) => setCurrent(e.target.value)}
          />
        </Field>
        <Field label={t('profile.newPassword')}>
          <input
            type="password"
            autoComplete="new-password"
            required
            value={next}
            onChange={(e) => setNext(e.target.value)}
          />
        </Field>
        <ErrorNote error={change.error} />
        {change.isSuccess && <Notice>{change.data.message}</Notice>}
        <button className="primary" disabled={change.isPending}>
          {t('profile.changePassword')}
        </button>
      </form>
    </Section>
  );
}
