import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import type { Database } from '../../db/schema.ts';
import { AppError, errorBody } from '../../errors.ts';
import { sha256Hex } from '../../lib/crypto.ts';
import { claimKey, completeKey, findKey, releaseKey } from './idempotency.repository.ts';

export interface Answer {
  status: number;
  body: unknown;
  /** True when this is the stored answer of an earlier request with the same key. */
  replayed: boolean;
}

/** Error codes after which something was sent or recorded: their answer is kept like a success. */
const FINAL_ERRORS = new Set(['provider_error']);

/**
 * `Idempotency-Key`: the first request with a key runs and its answer is stored; a repeat with the same
 * request gets that answer again without running; the same key with another request is 422; a repeat while
 * the first is still running is 409. A request that fails before doing anything (validation, credits)
 * frees its key, so it can be retried once fixed.
 */
export class IdempotencyService {
  constructor(private readonly deps: { db: Kysely<Database> }) {}

  static fingerprint(method: string, route: string, body: unknown): string {
    return sha256Hex(`${method} ${route}\n${JSON.stringify(body ?? null)}`);
  }

  async run(
    workspaceId: number,
    key: string | undefined,
    fingerprint: string,
    work: () => Promise<{ status: number; body: unknown }>,
  ): Promise<Answer> {
    if (key === undefined) return { ...(await work()), replayed: false };
    const { db } = this.deps;
    if (!(await claimKey(db, workspaceId, key, fingerprint, nowIso()))) {
      const stored = await findKey(db, workspaceId, key);
      if (!stored) return this.run(workspaceId, key, fingerprint, work);
      if (stored.request_hash !== fingerprint) {
        throw new AppError(
          'validation_error',
          'This Idempotency-Key was already used with a different request.',
          { 'idempotency-key': ['was already used with a different request; use a new key.'] },
        );
      }
      if (stored.status === 'in_flight' || stored.response_body === null) {
        throw new AppError(
          'conflict',
          'A request with this Idempotency-Key is still being processed. Retry shortly.',
        );
      }
      return {
        status: stored.response_status ?? 200,
        body: JSON.parse(stored.response_body) as unknown,
        replayed: true,
      };
    }
    try {
      const answer = await work();
      await completeKey(db, workspaceId, key, answer.status, JSON.stringify(answer.body), nowIso());
      return { ...answer, replayed: false };
    } catch (error) {
      if (error instanceof AppError && FINAL_ERRORS.has(error.code)) {
        const body = errorBody(error.code, error.message, error.details);
        await completeKey(db, workspaceId, key, error.statusCode, JSON.stringify(body), nowIso());
      } else {
        await releaseKey(db, workspaceId, key);
      }
      throw error;
    }
  }
}
