import { pageOf } from '../../db/paginate.ts';
import type { Insertable } from 'kysely';
import type { MessageRow, MessageTable } from '../../db/schema.ts';
import type { MessageChannel, MessageStatus } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';

export async function insertMessage(
  db: Executor,
  workspaceId: number,
  values: Omit<Insertable<MessageTable>, 'workspace_id'>,
): Promise<MessageRow> {
  return db
    .insertInto('messages')
    .values({ ...values, workspace_id: workspaceId })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function findMessage(
  db: Executor,
  workspaceId: number,
  id: number,
): Promise<MessageRow | undefined> {
  return db
    .selectFrom('messages')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export interface HistoryFilters {
  channel?: MessageChannel | undefined;
  status?: MessageStatus | undefined;
  campaignId?: number | undefined;
  to?: string | undefined;
  /** Messages to any of these addresses (a voter's phone and email). */
  toAny?: readonly string[] | undefined;
  /** Inclusive lower bound of created_at (ISO 8601). */
  from?: string | undefined;
  /** Exclusive upper bound of created_at (ISO 8601). */
  before?: string | undefined;
}

export async function listHistory(
  db: Executor,
  workspaceId: number,
  filters: HistoryFilters,
  page: number,
  perPage: number,
): Promise<{ rows: MessageRow[]; total: number }> {
  let query = db.selectFrom('messages').where('workspace_id', '=', workspaceId);
  if (filters.channel) query = query.where('channel', '=', filters.channel);
  if (filters.status) query = query.where('status', '=', filters.status);
  if (filters.campaignId !== undefined) query = query.where('campaign_id', '=', filters.campaignId);
  if (filters.to !== undefined) query = query.where('to', '=', filters.to);
  if (filters.toAny !== undefined) query = query.where('to', 'in', [...filters.toAny, '']);
  if (filters.from) query = query.where('created_at', '>=', filters.from);
  if (filters.before) query = query.where('created_at', '<', filters.before);
  return pageOf(query, (q) => q.selectAll().orderBy('id', 'desc'), page, perPage);
}

/** A message by id alone, for a provider's callback that names it (its account is checked by the caller). */
export function messageById(db: Executor, id: number): Promise<MessageRow | undefined> {
  return db.selectFrom('messages').selectAll().where('id', '=', id).executeTakeFirst();
}

/** An account's messages with these provider ids, 500 ids a query (a report may carry thousands). */
export async function messagesByProviderIds(
  db: Executor,
  accountId: number,
  ids: string[],
): Promise<MessageRow[]> {
  const unique = [...new Set(ids)];
  const rows: MessageRow[] = [];
  for (let i = 0; i < unique.length; i += 500)
    rows.push(
      ...(await db
        .selectFrom('messages')
        .selectAll()
        .where('channel_account_id', '=', accountId)
        .where('provider_message_id', 'in', unique.slice(i, i + 500))
        .execute()),
    );
  return rows;
}

/** A provider's status that is neither delivered nor failed, kept in `error` while the message stays sent. */
export async function noteSentStatus(db: Executor, id: number, note: string, now: string): Promise<void> {
  await db
    .updateTable('messages')
    .set({ error: note.slice(0, 500), updated_at: now })
    .where('id', '=', id)
    .where('status', '=', 'sent')
    .execute();
}

/** Failed messages by error code, those that failed (last changed) in [from, before), optionally one campaign's. */
export async function failureCounts(
  db: Executor,
  workspaceId: number,
  from: string,
  before: string,
  campaignId: number | undefined,
): Promise<Array<{ error_code: string; count: number; kind: 'stopped' | 'failed' }>> {
  let query = db
    .selectFrom('messages')
    .select(['error_code', (eb) => eb.fn.countAll<number>().as('count')])
    .where('workspace_id', '=', workspaceId)
    .where('status', '=', 'failed')
    .where('updated_at', '>=', from)
    .where('updated_at', '<', before);
  if (campaignId !== undefined) query = query.where('campaign_id', '=', campaignId);
  const rows = await query.groupBy('error_code').orderBy('count', 'desc').execute();
  return rows.map((r) => {
    const code = r.error_code ?? 'provider_rejected';
    return { error_code: code, count: Number(r.count), kind: STOPPED.has(code) ? 'stopped' : 'failed' };
  });
}

/**
 * Error codes of messages the office's own rules stopped (an opt-out, a silence period, a cancel, quiet hours),
 * kept apart, as `stopped`, from those a provider or an address failed (contract, fifth part).
 */
export const STOPPED: ReadonlySet<string> = new Set([
  'opted_out',
  'silence_period',
  'cancelled',
  'quiet_hours',
  'no_consent',
]);

/** The queued messages (questions not yet handed over) of these survey sessions. */
export async function queuedOfSessions(
  db: Executor,
  workspaceId: number,
  responseIds: readonly number[],
): Promise<number[]> {
  if (responseIds.length === 0) return [];
  const rows = await db
    .selectFrom('messages')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('survey_response_id', 'in', [...responseIds])
    .where('status', '=', 'queued')
    .execute();
  return rows.map((r) => r.id);
}

/** The status of a survey session's latest message (its current question). */
export async function latestOfSession(
  db: Executor,
  workspaceId: number,
  responseId: number,
): Promise<MessageStatus | undefined> {
  const last = await db
    .selectFrom('messages')
    .select('status')
    .where('workspace_id', '=', workspaceId)
    .where('survey_response_id', '=', responseId)
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  return last?.status as MessageStatus | undefined;
}

/** A message of an account by our id, or else by the provider's id for it (a call's own id). */
export async function accountMessage(
  db: Executor,
  account: { id: number; workspace_id: number },
  id: number | undefined,
  providerId: string,
): Promise<MessageRow | undefined> {
  const base = db
    .selectFrom('messages')
    .selectAll()
    .where('workspace_id', '=', account.workspace_id)
    .where('channel_account_id', '=', account.id);
  return (
    (id === undefined ? undefined : await base.where('id', '=', id).executeTakeFirst()) ??
    (await base.where('provider_message_id', '=', providerId).executeTakeFirst())
  );
}

/** Records the provider's id of a message that has none yet; false when it has one already. */
export async function bindProviderId(
  db: Executor,
  workspaceId: number,
  id: number,
  providerId: string,
): Promise<boolean> {
  const bound = await db
    .updateTable('messages')
    .set({ provider_message_id: providerId })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .where('provider_message_id', 'is', null)
    .executeTakeFirst();
  return Number(bound.numUpdatedRows) === 1;
}
