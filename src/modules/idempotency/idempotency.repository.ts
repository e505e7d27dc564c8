import type { Executor } from '../../db/types.ts';

export interface StoredKey {
  request_hash: string;
  status: 'in_flight' | 'done';
  response_status: number | null;
  response_body: string | null;
}

/** Takes the key for a request; false when the workspace already used it (the unique index decides races). */
export async function claimKey(
  db: Executor,
  workspaceId: number,
  key: string,
  requestHash: string,
  now: string,
): Promise<boolean> {
  const row = await db
    .insertInto('idempotency_keys')
    .values({
      workspace_id: workspaceId,
      key,
      request_hash: requestHash,
      status: 'in_flight',
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) => oc.columns(['workspace_id', 'key']).doNothing())
    .returning('id')
    .executeTakeFirst();
  return row !== undefined;
}

export async function findKey(
  db: Executor,
  workspaceId: number,
  key: string,
): Promise<StoredKey | undefined> {
  return db
    .selectFrom('idempotency_keys')
    .select(['request_hash', 'status', 'response_status', 'response_body'])
    .where('workspace_id', '=', workspaceId)
    .where('key', '=', key)
    .executeTakeFirst();
}

export async function completeKey(
  db: Executor,
  workspaceId: number,
  key: string,
  status: number,
  body: string,
  now: string,
): Promise<void> {
  await db
    .updateTable('idempotency_keys')
    .set({ status: 'done', response_status: status, response_body: body, updated_at: now })
    .where('workspace_id', '=', workspaceId)
    .where('key', '=', key)
    .execute();
}

export async function releaseKey(db: Executor, workspaceId: number, key: string): Promise<void> {
  await db
    .deleteFrom('idempotency_keys')
    .where('workspace_id', '=', workspaceId)
    .where('key', '=', key)
    .where('status', '=', 'in_flight')
    .execute();
}
