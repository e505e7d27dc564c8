import { pageOf } from '../../db/paginate.ts';
import { compiledOnce } from '../../db/compiled-once.ts';
import type { Role } from '../../domain.ts';
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
  last_used_at: string | null;
  user_id: number;
  workspace_id: number;
  role: Role;
  deactivated_at: string | null;
}

/** Every authenticated request runs this: built and compiled once (db/compiled-once.ts), not per request. */
const tokenOwner = compiledOnce((db, tokenId: number) =>
  db
    .selectFrom('api_tokens')
    .innerJoin('users', 'users.id', 'api_tokens.user_id')
    .select([
      'api_tokens.id as token_id',
      'api_tokens.token_hash',
      'api_tokens.expires_at',
      'api_tokens.revoked_at',
      'api_tokens.last_used_at',
      'users.id as user_id',
      'users.workspace_id',
      'users.role',
      'users.deactivated_at',
    ])
    .where('api_tokens.id', '=', tokenId),
);

export function findTokenOwner(db: Executor, tokenId: number): Promise<TokenOwner | undefined> {
  return tokenOwner.first(db, tokenId);
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

/** Revokes every live token of the user, but `exceptTokenId` when given (a password change keeps the caller's). */
export async function revokeUserTokens(
  db: Executor,
  userId: number,
  now: string,
  exceptTokenId?: number,
): Promise<number> {
  let query = db
    .updateTable('api_tokens')
    .set({ revoked_at: now })
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null);
  if (exceptTokenId !== undefined) query = query.where('id', '!=', exceptTokenId);
  const result = await query.executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** Revokes one live token of the user; false when the user has no such live token (someone else's, or gone). */
export async function revokeUserToken(
  db: Executor,
  userId: number,
  tokenId: number,
  now: string,
): Promise<boolean> {
  const result = await db
    .updateTable('api_tokens')
    .set({ revoked_at: now })
    .where('id', '=', tokenId)
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** One page of the user's live (neither revoked nor expired) tokens, newest first, and how many there are. */
export async function listLiveTokens(
  db: Executor,
  userId: number,
  now: string,
  page: number,
  perPage: number,
) {
  const query = db
    .selectFrom('api_tokens')
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]));
  return pageOf(
    query,
    (q) => q.select(['id', 'created_at', 'last_used_at', 'expires_at']).orderBy('id', 'desc'),
    page,
    perPage,
  );
}

/**
 * Records that the token was used, at most once a minute: a conditional UPDATE that writes only when the stored
 * time is missing or older than `staleBefore`. Callers skip it when the time they read is recent, so most
 * requests write nothing.
 */
export async function touchToken(db: Executor, tokenId: number, now: string, staleBefore: string) {
  await db
    .updateTable('api_tokens')
    .set({ last_used_at: now })
    .where('id', '=', tokenId)
    .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', staleBefore)]))
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

/**
 * Takes one attempt on the phone's newest live code, atomically: a single UPDATE that adds 1 to `attempts`
 * only while it is below `maxAttempts`, and returns the code's hash. Parallel guesses each take their own
 * attempt before any comparison, so no more than `maxAttempts` of them are ever judged. Undefined when
 * there is no live code or its attempts are used up.
 */
export async function takeOtpAttempt(db: Executor, phone: string, now: string, maxAttempts: number) {
  return db
    .updateTable('otp_codes')
    .set((eb) => ({ attempts: eb('attempts', '+', 1) }))
    .where('id', '=', (eb) =>
      eb
        .selectFrom('otp_codes')
        .select('id')
        .where('phone', '=', phone)
        .where('consumed_at', 'is', null)
        .where('expires_at', '>', now)
        .orderBy('id', 'desc')
        .limit(1),
    )
    .where('attempts', '<', maxAttempts)
    .returning(['id', 'code_hash'])
    .executeTakeFirst();
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
