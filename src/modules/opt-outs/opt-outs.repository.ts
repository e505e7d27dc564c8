import { pageOf } from '../../db/paginate.ts';
import type { Insertable } from 'kysely';
import type { OptOutRow, OptOutTable } from '../../db/schema.ts';
import type { MessageChannel, OptOutChannel, OptOutSource } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';

export interface OptOutFilters {
  channel?: OptOutChannel | undefined;
  address?: string | undefined;
}

/** Inserts an opt-out unless the address is already opted out of that channel; returns the row and whether it is new. */
export async function upsertOptOut(
  db: Executor,
  workspaceId: number,
  values: {
    address: string;
    channel: OptOutChannel;
    source: OptOutSource;
    reason: string | null;
    created_at: string;
  },
): Promise<{ row: OptOutRow; created: boolean }> {
  const inserted = await db
    .insertInto('opt_outs')
    .values({ workspace_id: workspaceId, ...values })
    .onConflict((oc) => oc.columns(['workspace_id', 'address', 'channel']).doNothing())
    .returningAll()
    .executeTakeFirst();
  if (inserted) return { row: inserted, created: true };
  const existing = await db
    .selectFrom('opt_outs')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('address', '=', values.address)
    .where('channel', '=', values.channel)
    .executeTakeFirstOrThrow();
  return { row: existing, created: false };
}

export type OptOutInsert = Insertable<OptOutTable>;

/**
 * Adds opt-outs in one statement, skipping each address already opted out of that channel (and a repeat
 * within `rows`); returns how many were added.
 */
export async function insertOptOutsIgnoringExisting(db: Executor, rows: OptOutInsert[]): Promise<number> {
  if (rows.length === 0) return 0;
  const added = await db
    .insertInto('opt_outs')
    .values(rows)
    .onConflict((oc) => oc.columns(['workspace_id', 'address', 'channel']).doNothing())
    .returning('id')
    .execute();
  return added.length;
}

export async function findOptOut(
  db: Executor,
  workspaceId: number,
  id: number,
): Promise<OptOutRow | undefined> {
  return db
    .selectFrom('opt_outs')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function deleteOptOut(db: Executor, workspaceId: number, id: number): Promise<boolean> {
  const result = await db
    .deleteFrom('opt_outs')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(result.numDeletedRows) === 1;
}

/** Removes the keyword opt-outs of an address on a channel (START / UNSTOP); returns the rows removed. */
export async function deleteKeywordOptOuts(
  db: Executor,
  workspaceId: number,
  address: string,
  channel: MessageChannel,
): Promise<OptOutRow[]> {
  return db
    .deleteFrom('opt_outs')
    .where('workspace_id', '=', workspaceId)
    .where('address', '=', address)
    .where('channel', '=', channel)
    .where('source', '=', 'keyword')
    .returningAll()
    .execute();
}

export async function listOptOuts(
  db: Executor,
  workspaceId: number,
  filters: OptOutFilters,
  page: number,
  perPage: number,
): Promise<{ rows: OptOutRow[]; total: number }> {
  const base = db
    .selectFrom('opt_outs')
    .where('workspace_id', '=', workspaceId)
    .$if(filters.channel !== undefined, (q) => q.where('channel', '=', filters.channel as OptOutChannel))
    .$if(filters.address !== undefined, (q) => q.where('address', '=', filters.address as string));
  return pageOf(base, (q) => q.selectAll().orderBy('id', 'desc'), page, perPage);
}

/** A page of a workspace's opt-outs after id `after`, oldest first (the CSV export). */
export async function optOutsAfter(
  db: Executor,
  workspaceId: number,
  after: number,
  limit: number,
): Promise<OptOutRow[]> {
  return db
    .selectFrom('opt_outs')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('id', '>', after)
    .orderBy('id')
    .limit(limit)
    .execute();
}

/** Of `addresses`, those opted out of `channel` (or of all channels) in the workspace. */
export async function optedOutAddresses(
  db: Executor,
  workspaceId: number,
  channel: MessageChannel,
  addresses: readonly string[],
): Promise<Set<string>> {
  if (addresses.length === 0) return new Set();
  const rows = await db
    .selectFrom('opt_outs')
    .select('address')
    .where('workspace_id', '=', workspaceId)
    .where('channel', 'in', [channel, 'all'])
    .where('address', 'in', [...new Set(addresses)])
    .execute();
  return new Set(rows.map((r) => r.address));
}

/**
 * Whether the workspace keeps any erased person's opt-out (an address `#<hash>`): a range of its address index,
 * since `#` sorts before every phone (`+`) and email.
 */
export async function hasErasedAddresses(db: Executor, workspaceId: number): Promise<boolean> {
  const row = await db
    .selectFrom('opt_outs')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('address', '>=', '#')
    .where('address', '<', '$')
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** Of `addresses` (phones and emails), those of a voter of the workspace whose consent is `given`. */
export async function consentedAddresses(
  db: Executor,
  workspaceId: number,
  addresses: readonly string[],
): Promise<Set<string>> {
  const found = new Set<string>();
  const unique = [...new Set(addresses)];
  for (const column of ['phone', 'email'] as const) {
    const some = unique.filter((a) => a.includes('@') === (column === 'email'));
    if (some.length === 0) continue;
    // Each column's own query, so that each uses its partial index of the consenting voters.
    const rows = await db
      .selectFrom('voters')
      .select(column)
      .where('workspace_id', '=', workspaceId)
      .where('consent_status', '=', 'given')
      .where(column, 'in', some)
      .execute();
    for (const row of rows) found.add(row[column]!);
  }
  return found;
}

/** The workspace, channel and address of a message (any workspace: a provider callback names only the message). */
export async function findMessageAddress(
  db: Executor,
  messageId: number,
): Promise<{ workspace_id: number; channel: MessageChannel; to: string } | undefined> {
  return db
    .selectFrom('messages')
    .select(['workspace_id', 'channel', 'to'])
    .where('id', '=', messageId)
    .executeTakeFirst();
}
