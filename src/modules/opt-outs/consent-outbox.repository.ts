import type { MessageErrorCode, MessageRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';

/**
 * The delivery gate's side of the outbox: claimed messages that consent rules stop (failed with a code) or
 * hold (quiet hours). Conditional on `queued`, like every move of the lifecycle.
 */

/** queued -> failed with an error code; returns the rows that moved (only those are refunded). */
export async function failQueuedWithCode(
  db: Executor,
  ids: readonly number[],
  code: MessageErrorCode,
  error: string,
  now: string,
): Promise<MessageRow[]> {
  if (ids.length === 0) return [];
  return db
    .updateTable('messages')
    .set({
      status: 'failed',
      error_code: code,
      error: error.slice(0, 500),
      failed_at: now,
      updated_at: now,
      claimed_by: null,
      lease_until: null,
    })
    .where('id', 'in', [...ids])
    .where('status', '=', 'queued')
    .returningAll()
    .execute();
}

/**
 * Claimed messages held until `until` (the end of quiet hours): unclaimed, due again then, and the claim's
 * attempt is not counted.
 */
export async function holdUntil(
  db: Executor,
  ids: readonly number[],
  workerId: string,
  until: string,
  now: string,
): Promise<void> {
  if (ids.length === 0) return;
  await db
    .updateTable('messages')
    .set((eb) => ({
      claimed_by: null,
      lease_until: null,
      next_attempt_at: until,
      attempts: eb('attempts', '-', 1),
      updated_at: now,
    }))
    .where('id', 'in', [...ids])
    .where('claimed_by', '=', workerId)
    .where('status', '=', 'queued')
    .execute();
}
