// A conversation's thread: its messages (newest first, paged back), the reply box, templates where a gateway
// needs one, linking the contact to a voter.
import { useInfiniteQuery, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { Link } from 'wouter';
import { api, data, envelope } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { useMe } from '../me.ts';
import { Badge, ErrorNote, Field, Loading, Notice, Section } from '../ui.tsx';
import { keys, queries } from '../queries.ts';
import type { components } from '../schema.d.ts';

/** Messages per page of a thread. */
const THREAD_PAGE = 100;

/** Reply drafts by conversation, kept while the console is open: a draft belongs to its conversation. */
const drafts = new Map<string, string>();

export function Thread({ id }: { id: string }) {
  const { t } = useI18n();
  const client = useQueryClient();
  const conversation = useQuery(queries.conversation(id));
  const { thread, hasNextPage, isFetchingNextPage, fetchNextPage } = useThreadMessages(id);
  const refresh = () => {
    void client.invalidateQueries({ queryKey: [...keys.conversation, id] });
    void client.invalidateQueries({ queryKey: keys.conversations });
  };
  const c = conversation.data;
  if (conversation.isPending) return <Loading />;
  if (!c) return <ErrorNote error={conversation.error} />;
  return (
    <Section
      title={c.voter_name ?? c.address}
      actions={
        <Link href="/inbox" className="button back">
          {t('inbox.back')}
        </Link>
      }
    >
      <p className="muted">
        {t(`channel.${c.channel}`)} · {c.address} · <Badge value={c.status} />{' '}
        {c.assigned_to_name ? t('inbox.assignedTo', { name: c.assigned_to_name }) : t('inbox.unassigned')}
        {c.voter_id && (
          <>
            {' · '}
            <Link href={`/voters/${c.voter_id}`}>{t('inbox.voter')}</Link>
          </>
        )}
      </p>
      {hasNextPage && (
        <button type="button" disabled={isFetchingNextPage} onClick={() => void fetchNextPage()}>
          {t('inbox.earlier')}
        </button>
      )}
      <MessageList thread={thread} channel={c.channel} />
      {c.opted_out && (
        <Notice>{t('inbox.optedOut', { address: c.address, channel: t(`channel.${c.channel}`) })}</Notice>
      )}
      {c.voter_id === null && <LinkVoter id={id} onLinked={refresh} />}
      <ReplyForm id={id} c={c} refresh={refresh} />
    </Section>
  );
}

type Conversation = components['schemas']['ConversationDetail'];
type ThreadMessage = ReturnType<typeof useThreadMessages>['thread'][number];

/** The thread's messages, oldest first, a page of THREAD_PAGE at a time from the newest back. */
function useThreadMessages(id: string) {
  const client = useQueryClient();
  // The thread from its newest page back: the newest messages first, then "Earlier messages" pages back to
  // the first one (a thread of 101 messages shows all 101, not the last page's one).
  const messages = useInfiniteQuery({
    queryKey: [...keys.conversation, id, 'messages'],
    initialPageParam: 0,
    queryFn: async ({ pageParam }) => {
      const read = (page: number) =>
        data(
          api.GET('/api/conversations/{id}/messages', {
            params: { path: { id }, query: { per_page: THREAD_PAGE, page } },
          }),
        );
      // 0: the newest page, found from the first (which says how many there are).
      let answer = await read(pageParam || 1);
      if (pageParam === 0 && answer.last_page > 1) answer = await read(answer.last_page);
      // Reading clears the assignee's unread count: the list shows it.
      void client.invalidateQueries({ queryKey: keys.conversations });
      return answer;
    },
    getNextPageParam: (last) => (last.current_page > 1 ? last.current_page - 1 : undefined),
  });
  const pages = messages.data?.pages ?? [];
  const thread = [...pages].reverse().flatMap((p) => p.data);
  const { hasNextPage, isFetchingNextPage, fetchNextPage } = messages;
  // A newest page of a few messages: the page before it too, so the thread opens with some context.
  useEffect(() => {
    if (pages.length === 1 && pages[0]!.data.length < 20 && hasNextPage && !isFetchingNextPage)
      void fetchNextPage();
  }, [pages, hasNextPage, isFetchingNextPage, fetchNextPage]);
  return { thread, hasNextPage, isFetchingNextPage, fetchNextPage };
}

function MessageList({ thread, channel }: { thread: ThreadMessage[]; channel: Conversation['channel'] }) {
  const { t, d, code } = useI18n();
  return (
    <ol className="thread" aria-label={t('inbox.thread')} aria-live="polite" tabIndex={0}>
      {thread.map((m) => (
        <li key={m.id} className={m.direction}>
          {m.withheld && m.body === '' ? <p className="muted">{t('inbox.withheld')}</p> : <p>{m.body}</p>}
          {m.keyword && (
            <p className="event" data-testid="consent-event">
              {t(m.keyword === 'stop' ? 'inbox.event.stop' : 'inbox.event.start', {
                channel: t(`channel.${channel}`),
              })}
            </p>
          )}
          <small>
            {d(m.created_at)}
            {m.status ? ` · ${t(`status.${m.status}` as 'status.sent')}` : ''}
            {m.error_code ? ` · ${code(m.error_code)}` : ''}
          </small>
        </li>
      ))}
    </ol>
  );
}

/** The reply (free text, a quick reply or a template where the gateway needs one) and the conversation's actions. */
function ReplyForm({ id, c, refresh }: { id: string; c: Conversation; refresh: () => void }) {
  const { t } = useI18n();
  const [text, setTextState] = useState(() => drafts.get(id) ?? '');
  const setText = (value: string) => {
    drafts.set(id, value);
    setTextState(value);
  };
  const [templateId, setTemplateId] = useState('');
  const [variables, setVariables] = useState<Record<string, string>>({});
  const templated = c.reply.templates_only === true;
  const reply = useMutation({
    mutationFn: () =>
      envelope(
        api.POST('/api/conversations/{id}/reply', {
          params: { path: { id } },
          body: templated
            ? {
                template_id: templateId,
                // Empty fields are left to the voter's record (their name, ward, ...).
                variables: Object.fromEntries(Object.entries(variables).filter(([, v]) => v.trim() !== '')),
              }
            : { message: text },
        }),
      ),
    onSuccess: () => {
      setText('');
      drafts.delete(id);
      setTemplateId('');
      setVariables({});
      refresh();
    },
  });
  const [actionError, setActionError] = useState<unknown>(null);
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        reply.mutate();
      }}
    >
      {templated && !c.opted_out && (
        <TemplateReply
          channel={c.channel}
          reply={c.reply}
          templateId={templateId}
          onTemplate={(id) => {
            setTemplateId(id);
            setVariables({});
          }}
          variables={variables}
          onVariables={setVariables}
        />
      )}
      {!templated && <FreeTextReply text={text} setText={setText} optedOut={c.opted_out} />}
      <ErrorNote error={reply.error ?? actionError} />
      <div className="actions">
        {!c.opted_out && (
          <button className="primary" disabled={reply.isPending || (templated && !templateId)}>
            {t('inbox.send')}
          </button>
        )}
        <ConversationActions id={id} c={c} refresh={refresh} onError={setActionError} />
      </div>
      {c.grievance_id && <Notice>{t('inbox.hasGrievance')}</Notice>}
    </form>
  );
}

/** A reply in the office's own words, or a quick reply to start from. */
function FreeTextReply({
  text,
  setText,
  optedOut,
}: {
  text: string;
  setText: (text: string) => void;
  optedOut: boolean;
}) {
  const { t } = useI18n();
  const quick = useQuery(queries.quickReplies());
  return (
    <>
      {quick.data && quick.data.data.length > 0 && (
        <Field label={t('inbox.quick')}>
          <select value="" onChange={(e) => setText(e.target.value)}>
            <option value="">{t('compose.choose')}</option>
            {quick.data.data.map((q) => (
              <option key={q.id} value={q.body}>
                {q.title}
              </option>
            ))}
          </select>
        </Field>
      )}
      {!optedOut && (
        <Field label={t('inbox.reply')}>
          <textarea rows={3} required value={text} onChange={(e) => setText(e.target.value)} />
        </Field>
      )}
    </>
  );
}

/** Close or reopen, assign, open a grievance. */
function ConversationActions({
  id,
  c,
  refresh,
  onError,
}: {
  id: string;
  c: Conversation;
  refresh: () => void;
  onError: (error: unknown) => void;
}) {
  const { t } = useI18n();
  const me = useMe();
  const team = useQuery({ ...queries.team(), enabled: me.user.role === 'politician' });
  const done = () => {
    onError(null);
    refresh();
  };
  const patch = useMutation({
    mutationFn: (body: { status?: 'open' | 'closed'; assigned_to?: number | null }) =>
      envelope(api.PATCH('/api/conversations/{id}', { params: { path: { id } }, body })),
    onSuccess: done,
    onError,
  });
  const grievance = useMutation({
    mutationFn: () =>
      envelope(api.POST('/api/conversations/{id}/grievance', { params: { path: { id } }, body: {} })),
    onSuccess: done,
    onError,
  });
  return (
    <>
      {c.status === 'open' ? (
        <button type="button" onClick={() => patch.mutate({ status: 'closed' })}>
          {t('inbox.close')}
        </button>
      ) : (
        <button type="button" onClick={() => patch.mutate({ status: 'open' })}>
          {t('inbox.reopen')}
        </button>
      )}
      {c.assigned_to !== me.user.id && me.user.role !== 'volunteer' && (
        <button type="button" onClick={() => patch.mutate({ assigned_to: me.user.id })}>
          {t('inbox.assignMe')}
        </button>
      )}
      {team.data && (
        <label className="inline">
          <span>{t('inbox.assignTo')}</span>
          <select
            value={c.assigned_to ?? ''}
            onChange={(e) => patch.mutate({ assigned_to: e.target.value ? Number(e.target.value) : null })}
          >
            <option value="">{t('inbox.unassigned')}</option>
            {team.data.data
              .filter((u) => u.active)
              .map((u) => (
                <option key={u.id} value={u.id}>
                  {u.name}
                </option>
              ))}
          </select>
        </label>
      )}
      {!c.grievance_id && (
        <button type="button" onClick={() => grievance.mutate()}>
          {t('inbox.openGrievance')}
        </button>
      )}
    </>
  );
}

/** A template's variables in order of appearance, without repeats (`{{name}}`, `{{first_name|friend}}`). */
function variablesOf(body: string): string[] {
  const names = [...body.matchAll(/\{\{\s*([^{}|]*?)\s*(?:\|[^{}]*)?\}\}/g)].map((m) => m[1]!);
  return [...new Set(names)];
}

/** TRAI's limit on a DLT template's variable. */
const DLT_VARIABLE_MAX = 30;

/**
 * The reply box where the gateway sends templates only (SMS through DLT, WhatsApp outside its 24-hour window):
 * the workspace's templates for the channel, those the gateway knows first (the others cannot be chosen), a
 * field per variable (left empty: the voter's own value), and the text as it will go.
 */
function TemplateReply(props: {
  channel: string;
  reply: {
    reason: 'dlt' | 'whatsapp_window' | null;
    provider_label: string;
    template_ids: string[];
    voter_values: Record<string, string>;
  };
  templateId: string;
  onTemplate: (id: string) => void;
  variables: Record<string, string>;
  onVariables: (values: Record<string, string>) => void;
}) {
  const { t } = useI18n();
  const { reply, templateId, variables } = props;
  const templates = useQuery(queries.templates(props.channel as 'sms' | 'whatsapp'));
  const all = templates.data?.data ?? [];
  const fits = new Set(reply.template_ids);
  const usable = all.filter((tpl) => fits.has(tpl.id));
  const others = all.filter((tpl) => !fits.has(tpl.id));
  const chosen = all.find((tpl) => tpl.id === templateId);
  const names = chosen ? variablesOf(chosen.body) : [];
  const rendered = chosen
    ? renderReply(chosen.body, variables, reply.voter_values, (name) =>
        t(`variable.${name}` as 'variable.name'),
      )
    : '';
  return (
    <>
      <Notice>
        {t(reply.reason === 'whatsapp_window' ? 'inbox.templatesOnly.window' : 'inbox.templatesOnly.dlt', {
          provider: reply.provider_label,
        })}
      </Notice>
      <Field label={t('inbox.template')} hint={usable.length === 0 ? t('inbox.template.none') : undefined}>
        <select required value={templateId} onChange={(e) => props.onTemplate(e.target.value)}>
          <option value="">{t('compose.choose')}</option>
          {usable.map((tpl) => (
            <option key={tpl.id} value={tpl.id}>
              {tpl.name}
            </option>
          ))}
          {others.length > 0 && (
            <optgroup label={t('inbox.template.unregistered', { provider: reply.provider_label })}>
              {others.map((tpl) => (
                <option key={tpl.id} value={tpl.id} disabled>
                  {tpl.name}
                </option>
              ))}
            </optgroup>
          )}
        </select>
      </Field>
      {names.map((name) => (
        <Field
          key={name}
          label={t(`variable.${name}` as 'variable.name')}
          hint={
            reply.reason === 'dlt'
              ? t('inbox.variable.dltHint', { max: DLT_VARIABLE_MAX })
              : t('inbox.variable.hint')
          }
        >
          <input
            value={variables[name] ?? ''}
            maxLength={reply.reason === 'dlt' ? DLT_VARIABLE_MAX : 500}
            onChange={(e) => props.onVariables({ ...variables, [name]: e.target.value })}
          />
        </Field>
      ))}
      {chosen && (
        <div className="sample">
          <h3>{t('inbox.template.preview')}</h3>
          <p data-testid="reply-rendered">{rendered}</p>
        </div>
      )}
    </>
  );
}

/**
 * A template's text as the voter would get it: each variable as typed, else the voter's own value, else its
 * name in brackets.
 */
function renderReply(
  body: string,
  typed: Record<string, string>,
  voter: Record<string, string>,
  label: (name: string) => string,
): string {
  return body.replace(/\{\{\s*([^{}|]*?)\s*(\|[^{}]*)?\}\}/g, (_, name: string) =>
    typed[name]?.trim() ? typed[name]!.trim() : voter[name] || `[${label(name)}]`,
  );
}

/**
 * A conversation with a number not on the roll: find the voter (by EPIC number, name or phone) and link them; the
 * voter's empty phone takes the contact's.
 */
function LinkVoter({ id, onLinked }: { id: string; onLinked: () => void }) {
  const { t } = useI18n();
  const [search, setSearch] = useState('');
  const [term, setTerm] = useState('');
  const found = useQuery({ ...queries.voterList({ search: term, per_page: 5 }), enabled: term !== '' });
  const link = useMutation({
    mutationFn: (voterId: number) =>
      envelope(
        api.POST('/api/conversations/{id}/voter', { params: { path: { id } }, body: { voter_id: voterId } }),
      ),
    onSuccess: onLinked,
  });
  return (
    <details className="link-voter">
      <summary>{t('inbox.link')}</summary>
      <div className="filters" role="search">
        <Field label={t('inbox.link.search')}>
          <input type="search" value={search} onChange={(e) => setSearch(e.target.value)} />
        </Field>
        <button type="button" onClick={() => setTerm(search.trim())}>
          {t('filter.apply')}
        </button>
      </div>
      <ErrorNote error={found.error ?? link.error} />
      <ul className="plain">
        {(found.data?.data ?? []).map((v) => (
          <li key={v.id}>
            {v.name} {v.epic_number ? <code>{v.epic_number}</code> : null} {v.ward ?? ''}{' '}
            <button type="button" disabled={link.isPending} onClick={() => link.mutate(v.id)}>
              {t('inbox.link.this')}
            </button>
          </li>
        ))}
      </ul>
    </details>
  );
}
