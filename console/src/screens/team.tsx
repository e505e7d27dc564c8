import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, envelope } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { useMe } from '../me.ts';
import { Badge, ErrorNote, Field, Loading, Pager, Section, Table } from '../ui.tsx';
import { keys, queries } from '../queries.ts';

type Role = 'politician' | 'manager' | 'volunteer';
const list = (text: string) =>
  text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/** The team: members, roles, coverage, deactivate; add a member; the workspace's audit log. */
export function Team() {
  const { t } = useI18n();
  return (
    <>
      <h1>{t('nav.team')}</h1>
      <Members />
      <AuditLog />
    </>
  );
}

/** A change to the team is an entry in the audit log below: both are read again at once. */
function useTeamRefresh() {
  const client = useQueryClient();
  return () =>
    Promise.all([
      client.invalidateQueries({ queryKey: keys.team }),
      client.invalidateQueries({ queryKey: keys.audit }),
    ]);
}

type Member = NonNullable<ReturnType<typeof useTeam>['data']>['data'][number];
type Coverage = { wards: string[]; booths: string[]; constituencies: string[] };
type MemberPatch = { id: number; body: { role?: Role; active?: boolean; coverage?: Coverage } };

function useTeam() {
  return useQuery(queries.team());
}

function Members() {
  const { t } = useI18n();
  const members = useTeam();
  const refresh = useTeamRefresh();
  const patch = useMutation({
    mutationFn: ({ id, body }: MemberPatch) =>
      envelope(api.PATCH('/api/users/{id}', { params: { path: { id } }, body })),
    onSuccess: refresh,
  });
  const [editing, setEditing] = useState<Member | null>(null);
  return (
    <Section title={t('team.members')}>
      <ErrorNote error={members.error ?? patch.error} />
      {members.isPending ? (
        <Loading />
      ) : (
        <Table
          caption={t('team.members')}
          head={[
            t('field.name'),
            t('field.email'),
            t('field.role'),
            t('team.coverage'),
            t('field.status'),
            '',
          ]}
        >
          {members.data?.data.map((u) => (
            <MemberRow
              key={u.id}
              u={u}
              change={(body) => patch.mutate({ id: u.id, body })}
              edit={() => setEditing(u)}
            />
          ))}
        </Table>
      )}
      {editing && (
        <CoverageForm
          key={editing.id}
          member={editing}
          save={(coverage) =>
            patch.mutate({ id: editing.id, body: { coverage } }, { onSuccess: () => setEditing(null) })
          }
          cancel={() => setEditing(null)}
        />
      )}
      <AddMember refresh={refresh} />
    </Section>
  );
}

/** A member: their role (changeable but one's own), coverage, status, and (de)activation. */
function MemberRow({
  u,
  change,
  edit,
}: {
  u: Member;
  change: (body: MemberPatch['body']) => void;
  edit: () => void;
}) {
  const { t } = useI18n();
  const me = useMe();
  return (
    <tr key={u.id}>
      <td>{u.name}</td>
      <td>{'email' in u ? u.email : ''}</td>
      <td>
        {u.id === me.user.id ? (
          t(`role.${u.role}`)
        ) : (
          <select
            aria-label={t('team.roleOf', { name: u.name })}
            value={u.role}
            onChange={(e) => change({ role: e.target.value as Role })}
          >
            {(['politician', 'manager', 'volunteer'] as const).map((r) => (
              <option key={r} value={r}>
                {t(`role.${r}`)}
              </option>
            ))}
          </select>
        )}
      </td>
      <td>
        {[
          ...u.coverage.constituencies,
          ...u.coverage.wards.map((w) => `${t('field.ward')} ${w}`),
          ...u.coverage.booths.map((b) => `${t('field.booth')} ${b}`),
        ].join(', ') || '—'}{' '}
        {u.role === 'volunteer' && (
          <button type="button" className="link" onClick={edit}>
            {t('edit')}
          </button>
        )}
      </td>
      <td>
        <Badge value={u.active ? 'active' : 'inactive'} />
      </td>
      <td>
        {u.id !== me.user.id &&
          (u.active ? (
            <button
              type="button"
              className="danger"
              onClick={() =>
                window.confirm(t('team.confirmDeactivate', { name: u.name })) && change({ active: false })
              }
            >
              {t('team.deactivate')}
            </button>
          ) : (
            <button type="button" onClick={() => change({ active: true })}>
              {t('team.reactivate')}
            </button>
          ))}
      </td>
    </tr>
  );
}

/** A volunteer's coverage: the constituencies, wards and booths whose voters and conversations they see. */
function CoverageForm({
  member,
  save,
  cancel,
}: {
  member: Member;
  save: (coverage: Coverage) => void;
  cancel: () => void;
}) {
  const { t } = useI18n();
  const [coverage, setCoverage] = useState({
    wards: member.coverage.wards.join(', '),
    booths: member.coverage.booths.join(', '),
    constituencies: member.coverage.constituencies.join(', '),
  });
  return (
    <form
      className="form-grid"
      onSubmit={(e) => {
        e.preventDefault();
        save({
          wards: list(coverage.wards),
          booths: list(coverage.booths),
          constituencies: list(coverage.constituencies),
        });
      }}
    >
      <h3>{t('team.coverage')}</h3>
      <Field label={t('team.constituencies')} hint={t('team.commaHint')}>
        <input
          value={coverage.constituencies}
          onChange={(e) => setCoverage({ ...coverage, constituencies: e.target.value })}
        />
      </Field>
      <Field label={t('team.wards')}>
        <input value={coverage.wards} onChange={(e) => setCoverage({ ...coverage, wards: e.target.value })} />
      </Field>
      <Field label={t('team.booths')}>
        <input
          value={coverage.booths}
          onChange={(e) => setCoverage({ ...coverage, booths: e.target.value })}
        />
      </Field>
      <div className="actions">
        <button className="primary">{t('save')}</button>
        <button type="button" onClick={cancel}>
          {t('cancel')}
        </button>
      </div>
    </form>
  );
}

/** A new member: name, email, a first password, phone, role. */
function AddMember({ refresh }: { refresh: () => Promise<unknown> }) {
  const { t } = useI18n();
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [phone, setPhone] = useState('');
  const [role, setRole] = useState<Role>('volunteer');
  const add = useMutation({
    mutationFn: () =>
      envelope(
        api.POST('/api/users', { body: { name, email, password, role, ...(phone ? { phone } : {}) } }),
      ),
    onSuccess: () => {
      setName('');
      setEmail('');
      setPassword('');
      setPhone('');
      void refresh();
    },
  });
  return (
    <>
      <h3>{t('team.add')}</h3>
      <form
        className="form-grid"
        onSubmit={(e) => {
          e.preventDefault();
          add.mutate();
        }}
      >
        <Field label={t('field.name')}>
          <input required value={name} onChange={(e) => setName(e.target.value)} />
        </Field>
        <Field label={t('field.email')}>
          <input type="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </Field>
        <Field label={t('team.firstPassword')}>
          <input
            type="password"
            autoComplete="new-password"
            required
            value={password}
            onChange={(e) => setPassword(e.target.value)}
          />
        </Field>
        <Field label={t('field.phone.optional')}>
          <input type="tel" value={phone} onChange={(e) => setPhone(e.target.value)} />
        </Field>
        <Field label={t('field.role')}>
          <select value={role} onChange={(e) => setRole(e.target.value as Role)}>
            <option value="volunteer">{t('role.volunteer')}</option>
            <option value="manager">{t('role.manager')}</option>
            <option value="politician">{t('role.politician')}</option>
          </select>
        </Field>
        <ErrorNote error={add.error} />
        <div className="actions">
          <button className="primary" disabled={add.isPending}>
            {t('team.add')}
          </button>
        </div>
      </form>
    </>
  );
}

function AuditLog() {
  const { t, d } = useI18n();
  const [page, setPage] = useState(1);
  const log = useQuery({
    ...queries.audit(page),
    // New entries (a member added elsewhere, a send) show without a reload.
    refetchInterval: 10_000,
  });
  return (
    <Section title={t('team.audit')}>
      <ErrorNote error={log.error} />
      {log.data && (
        <>
          <Table
            caption={t('team.audit')}
            head={[t('field.created'), t('team.actor'), t('team.action'), t('team.target')]}
          >
            {log.data.data.map((a) => (
              <tr key={a.id}>
                <td>{d(a.created_at)}</td>
                <td>{a.actor_name ?? '—'}</td>
                <td>
                  <code>{a.action}</code>
                </td>
                <td>
                  {a.target_type} {a.target_id}
                </td>
              </tr>
            ))}
          </Table>
          <Pager page={page} lastPage={log.data.last_page} onPage={setPage} />
        </>
      )}
    </Section>
  );
}
