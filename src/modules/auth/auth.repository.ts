import type { Role } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';

export async function insertToken(
  db: Executor,
  values: {
    user_id: number;
    workspace_id: number;
    token_hash: string;
    name: string;
    created_at: string;
    expires_at: string | null;
  },
): Promise<number> {
  const row = await db.insertInto('api_tokens').values(values).returning('id').executeTakeFirstOrThrow();
  return row.id;
}

export interface TokenOwner {
  token_id: number;
  token_hash: string;
  expires_at: string | null;
  revoked_at: string | null;
  user_id: number;
  workspace_id: number;
  role: Role;
}

export async function findTokenOwner(db: Executor, tokenId: number): Promise<TokenOwner | undefined> {
  return db
    .selectFrom('api_tokens')
    .innerJoin('users', 'users.id', 'api_tokens.user_id')
    .select([
      'api_tokens.id as token_id',
      'api_tokens.token_hash',
      'api_tokens.expires_at',
      'api_tokens.revoked_at',
      'users.id as user_id',
      'users.workspace_id',
      'users.role',
    ])
    .where('api_tokens.id', '=', tokenId)
    .executeTakeFirst();
}

export async function revokeToken(
  db: Executor,
  workspaceId: number,
  tokenId: number,
  now: string,
): Promise<void> {
  await db
    .updateTable('api_tokens')
    .set({ revoked_at: now })
    .where('id', '=', tokenId)
    .where('workspace_id', '=', workspaceId)
    .where('revoked_at', 'is', null)
    .execute();
}

export async function insertOtp(
  db: Executor,
  values: { phone: string; code_hash: string; expires_at: string; created_at: string },
): Promise<void> {
  // A new code replaces any earlier one still outstanding for the phone.
  await db
    .updateTable('otp_codes')
    .set({ consumed_at: values.created_at })
    .where('phone', '=', values.phone)
    .where('consumed_at', 'is', null)
    .execute();
  await db
    .insertInto('otp_codes')
    .values({ ...values, attempts: 0 })
    .execute();
}

export async function findLiveOtp(db: Executor, phone: string, now: string, maxAttempts: number) {
  return db
    .selectFrom('otp_codes')
    .select(['id', 'code_hash', 'attempts'])
    .where('phone', '=', phone)
    .where('consumed_at', 'is', null)
    .where('expires_at', '>', now)
    .where('attempts', '<', maxAttempts)
    .orderBy('id', 'desc')
    .executeTakeFirst();
}

export async function countOtpFailure(db: Executor, id: number): Promise<void> {
  await db
    .updateTable('otp_codes')
    .set((eb) => ({ attempts: eb('attempts', '+', 1) }))
    .where('id', '=', id)
    .execute();
}

/** Marks the code used; false when another request used it first (single use under concurrency). */
export async function consumeOtp(db: Executor, id: number, now: string): Promise<boolean> {
  const result = await db
    .updateTable('otp_codes')
    .set({ consumed_at: now })
    .where('id', '=', id)
    .where('consumed_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}
