import { randomInt } from 'node:crypto';
import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import type { Database } from '../../db/schema.ts';
import type { PrivacyRequestType } from '../../domain.ts';
import { AppError, notFound, validationError } from '../../errors.ts';
import { digestsEqual, hmacHex } from '../../lib/crypto.ts';
import type { AuditActor } from '../audit/audit.repository.ts';
import { addOptOut } from '../opt-outs/opt-outs.service.ts';
import { insertRequest, personAddress, requestRef } from './privacy.service.ts';

/** What the public form asks for: a request, or a withdrawal of consent. */
export type PublicAsk = PrivacyRequestType | 'withdraw';

/** Sends a one-time code to an address (SMS to a phone, email to an email), by the workspace's own carrier. */
export type CodeSender = (
  workspaceId: number,
  address: string,
  code: string,
  minutes: number,
) => Promise<void>;

const CODE_TTL_MS = 10 * 60_000;
const MAX_ATTEMPTS = 5;
/** Codes being stored and sent after the answer went; past it, a flood, not a person: nothing more is sent. */
const MAX_PENDING = 1000;
const WRONG_CODE = 'The code is wrong, expired or already used. Ask for a new code.';

/**
 * The public page's requests (the contract's fourth part): a person proves they hold an address with a code
 * sent to it, then makes a request (`received_via: public_form`, `verified`) or withdraws consent. The answer to
 * "send a code" is the same whether or not the address is known to the office, and it goes before the code is
 * stored or sent, so neither its words nor its timing tell. Codes and addresses are kept only as HMACs.
 */
export class PublicRequests {
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly deps: {
      db: Kysely<Database>;
      appKey: Buffer;
      defaultCountry: string;
      responseDays: number;
      sendCode: CodeSender;
      log: { error(obj: object, msg: string): void; warn(obj: object, msg: string): void };
    },
  ) {}

  /** The workspace of a public page, or 404. */
  async workspace(publicId: string) {
    const row = await this.deps.db
      .selectFrom('workspaces')
      .select(['id', 'name'])
      .where('public_id', '=', publicId)
      .executeTakeFirst();
    if (!row) throw notFound('Privacy page');
    return { id: Number(row.id), name: row.name };
  }

  address(raw: string): string {
    const address = personAddress(raw, this.deps.defaultCountry);
    if (!address)
      throw validationError({
        address: ['must be your phone number (e.g. +919812345678) or your email address.'],
      });
    return address;
  }

  private addressHash(workspaceId: number, address: string) {
    return hmacHex(this.deps.appKey, `privacy-address\n${workspaceId}\n${address}`);
  }

  private codeHash(workspaceId: number, address: string, code: string) {
    return hmacHex(this.deps.appKey, `privacy-code\n${workspaceId}\n${address}\n${code}`);
  }

  /** Answers at once; the code is stored and sent afterwards. */
  sendCode(workspaceId: number, address: string): { expires_in: number } {
    if (this.pending.size >= MAX_PENDING) this.deps.log.warn({}, 'privacy code not sent: too many in flight');
    else {
      const task = this.issue(workspaceId, address).catch((error: unknown) =>
        this.deps.log.error({ err: error }, 'a privacy code could not be sent'),
      );
      this.pending.add(task);
      void task.finally(() => this.pending.delete(task));
    }
    return { expires_in: CODE_TTL_MS / 1000 };
  }

  /** Waits for the codes still being sent (shutdown, tests). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.pending]);
  }

  private async issue(workspaceId: number, address: string): Promise<void> {
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const now = Date.now();
    await this.deps.db
      .insertInto('privacy_codes')
      .values({
        workspace_id: workspaceId,
        address_hash: this.addressHash(workspaceId, address),
        code_hash: this.codeHash(workspaceId, address, code),
        expires_at: new Date(now + CODE_TTL_MS).toISOString(),
        used_at: null,
        created_at: new Date(now).toISOString(),
      })
      .execute();
    await this.deps.sendCode(workspaceId, address, code, CODE_TTL_MS / 60_000);
  }

  /**
   * Checks the code (each try counted before it is compared; five per code) and acts: a withdrawal opts the
   * address out of every channel (`privacy_form`: the voters with it get consent `withdrawn`), anything else
   * becomes a verified request.
   */
  async confirm(
    workspaceId: number,
    actor: AuditActor,
    input: { address: string; code: string; ask: PublicAsk; note: string | null },
  ): Promise<{ withdrawn: true } | { request_id: string; due_at: string }> {
    const { db } = this.deps;
    const hash = this.addressHash(workspaceId, input.address);
    const now = nowIso();
    return db
      .transaction()
      .execute(async (trx) => {
        const live = await trx
          .selectFrom('privacy_codes')
          .select(['id', 'code_hash', 'attempts'])
          .where('workspace_id', '=', workspaceId)
          .where('address_hash', '=', hash)
          .where('used_at', 'is', null)
          .where('expires_at', '>', now)
          .orderBy('id', 'desc')
          .limit(1)
          .executeTakeFirst();
        if (!live || live.attempts >= MAX_ATTEMPTS) throw new AppError('unauthorized', WRONG_CODE);
        await trx
          .updateTable('privacy_codes')
          .set((eb) => ({ attempts: eb('attempts', '+', 1) }))
          .where('id', '=', live.id)
          .execute();
        if (!digestsEqual(live.code_hash, this.codeHash(workspaceId, input.address, input.code.trim())))
          return { wrong: true as const };
        await trx.updateTable('privacy_codes').set({ used_at: now }).where('id', '=', live.id).execute();
        if (input.ask === 'withdraw') {
          await addOptOut(
            trx,
            workspaceId,
            actor,
            input.address,
            'all',
            'privacy_form',
            'Withdrew consent on the public privacy page.',
          );
          return { withdrawn: true as const };
        }
        const row = await insertRequest(
          trx,
          workspaceId,
          actor,
          {
            type: input.ask,
            address: input.address,
            voterId: null,
            note: input.note,
            via: 'public_form',
            status: 'verified',
          },
          this.deps.responseDays,
        );
        return { request_id: requestRef(Number(row.id)), due_at: new Date(row.due_at).toISOString() };
      })
      .then((result) => {
        // A wrong code still counts its try (committed above); the caller is told only that it was wrong.
        if ('wrong' in result) throw new AppError('unauthorized', WRONG_CODE);
        return result;
      });
  }
}
