import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { useI18n } from '../i18n.tsx';
import { Empty, ErrorNote, Field, Loading, Pager } from '../ui.tsx';
import { Thread } from './thread.tsx';
import type { components } from '../schema.d.ts';
import { queries } from '../queries.ts';

interface InboxFilters {
  status: '' | 'open' | 'closed';
  assigned_to: string;
  unread: boolean;
  search: string;
}

/**
 * The inbox: conversations (a volunteer sees only theirs) with filters, and the open one's thread with reply,
 * quick replies, assign, close and "open a grievance". The live stream (main.tsx) refreshes both as messages
 * arrive.
 */
export function Inbox({ id }: { id?: string }) {
  const { t } = useI18n();
  const [filters, setFilters] = useState<InboxFilters>({
    status: 'open',
    assigned_to: '',
    unread: false,
    search: '',
  });
  const [page, setPage] = useState(1);
  const list = useQuery({
    ...queries.conversationList({
      page,
      per_page: 25,
      ...(filters.status ? { status: filters.status } : {}),
      ...(filters.assigned_to ? { assigned_to: filters.assigned_to } : {}),
      ...(filters.unread ? { unread: true } : {}),
      ...(filters.search ? { search: filters.search } : {}),
    }),
    placeholderData: keepPreviousData,
  });
  const selected = id;
  return (
    <>
      <h1>{t('nav.inbox')}</h1>
      <div className={selected ? 'inbox has-thread' : 'inbox'}>
        <div className="inbox-list">
          <InboxFilterForm
            filters={filters}
            apply={(f) => {
              setFilters(f);
              setPage(1);
            }}
          />
          <ErrorNote error={list.error} />
          {list.isPending ? (
            <Loading />
          ) : list.data?.data.length === 0 ? (
            <Empty>{t('inbox.none')}</Empty>
          ) : (
            <ConversationList conversations={list.data?.data ?? []} selected={selected} />
          )}
          <Pager page={page} lastPage={list.data?.last_page ?? 1} onPage={setPage} />
        </div>
        {/* Keyed: a reply typed in one thread (and its error) never stays when another is opened. */}
        {selected ? (
          <Thread key={selected} id={selected} />
        ) : (
          <p className="muted inbox-empty">{t('inbox.pick')}</p>
        )}
      </div>
    </>
  );
}

/** Search, status, assignee and unread: a change applies at once (the search on submit), from page 1. */
function InboxFilterForm({
  filters,
  apply,
}: {
  filters: InboxFilters;
  apply: (filters: InboxFilters) => void;
}) {
  const { t } = useI18n();
  const [search, setSearch] = useState('');
  return (
    <form
      className="filters"
      role="search"
      onSubmit={(e) => {
        e.preventDefault();
        apply({ ...filters, search });
      }}
    >
      <Field label={t('field.search')}>
        <input type="search" value={search} onChange={(e) => setSearch(e.target.value)} />
      </Field>
      <Field label={t('field.status')}>
        <select
          value={filters.status}
          onChange={(e) => apply({ ...filters, status: e.target.value as InboxFilters['status'] })}
        >
          <option value="open">{t('status.open')}</option>
          <option value="closed">{t('status.closed')}</option>
          <option value="">{t('filter.all')}</option>
        </select>
      </Field>
      <Field label={t('inbox.assigned')}>
        <select
          value={filters.assigned_to}
          onChange={(e) => apply({ ...filters, assigned_to: e.target.value })}
        >
          <option value="">{t('filter.all')}</option>
          <option value="me">{t('inbox.mine')}</option>
          <option value="none">{t('inbox.unassigned')}</option>
        </select>
      </Field>
      <label className="check">
        <input
          type="checkbox"
          checked={filters.unread}
          onChange={(e) => apply({ ...filters, unread: e.target.checked })}
        />
        {t('inbox.unreadOnly')}
      </label>
      <button>{t('filter.apply')}</button>
    </form>
  );
}

type ConversationRow = components['schemas']['Conversation'];

/** The conversations of the page, the open one marked. */
function ConversationList({
  conversations,
  selected,
}: {
  conversations: ConversationRow[];
  selected: string | undefined;
}) {
  const { t, n, d } = useI18n();
  return (
    <ul className="conversations" aria-label={t('nav.inbox')}>
      {conversations.map((c) => (
        <li key={c.id} className={c.id === selected ? 'current' : undefined}>
          <Link href={`/inbox/${c.id}`} aria-current={c.id === selected ? 'true' : undefined}>
            <strong>{c.voter_name ?? c.address}</strong>
            <span className="muted">
              {t(`channel.${c.channel}`)} · {d(c.last_message_at)}
            </span>
            <span className="preview">{c.last_message_preview}</span>
            {c.unread_count > 0 && (
              <span className="badge badge-unread">
                {t('inbox.unreadCount', { count: n(c.unread_count) })}
              </span>
            )}
          </Link>
        </li>
      ))}
    </ul>
  );
}
