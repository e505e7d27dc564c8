import { randomBytes, randomInt } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Config } from '../../config.ts';
import { nowIso } from '../../db/connect.ts';
import type { Database, UserRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { AppError, validationError } from '../../errors.ts';
import type { AuthContext } from '../../http/guard.ts';
import { pageResult } from '../../domain.ts';
import { type TokenOwners } from './token-owners.ts';
import { digestsEqual, hmacHex, sha256Hex } from '../../lib/crypto.ts';
import { toE164 } from '../../lib/phone.ts';
import type { MessageProvider } from '../../providers/provider.ts';
import { addCredits, balances } from '../credits/credits.repository.ts';
import { creditsView } from '../credits/credits.schemas.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import { findUser, findUserByEmail, findUserByPhone, updateUser } from '../users/users.repository.ts';
import { userView } from '../users/users.schemas.ts';
import { type NewUser, recordCreated, type UsersService } from '../users/users.service.ts';
import { insertWorkspace } from '../workspaces/workspaces.repository.ts';
import { defaultWorkspaceName } from '../workspaces/workspaces.rules.ts';
import { hashPassword, passwordProblem, verifyDecoy, verifyPassword } from './auth.passwords.ts';
import {
  consumeOtp,
  insertOtp,
  insertToken,
  listLiveTokens,
  revokeToken,
  revokeUserToken,
  revokeUserTokens,
  takeOtpAttempt,
  touchToken,
} from './auth.repository.ts';

const INVALID_CREDENTIALS = 'Invalid email or password.';
/** OTPs in flight at once; past it, send-otp still answers but sends nothing (a flood, not a person). */
const MAX_PENDING_OTPS = 1000;
const INVALID_OTP = 'The code is wrong, expired or already used. Request a new one with /api/auth/send-otp.';
/** `last_used_at` is written at most this often per token, so that a request does not cost a write. */
const TOUCH_EVERY_MS = 60_000;

export interface AuthServiceDeps {
  db: Kysely<Database>;
  config: Pick<
    Config,
    'appKey' | 'tokenTtlSeconds' | 'otp' | 'signupCredits' | 'defaultCountry' | 'registration'
  >;
  users: UsersService;
  sms: MessageProvider;
  /**
   * What carries a workspace's sign-in codes: its default SMS account, where it has one (through its
   * DLT-registered OTP template, by provider, where its provider sends templates only), else undefined (the
   * deployment's SMS provider).
   */
  otpRoute?: (
    workspaceId: number,
  ) => Promise<{ provider: MessageProvider; templateIds?: Record<string, string> } | undefined>;
  log: FastifyBaseLogger;
  /** Token owners kept between requests; told of every change this service commits. */
  tokenOwners: TokenOwners;
}

export class AuthService {
  constructor(private readonly deps: AuthServiceDeps) {}

  /** Creates a workspace and its first user (a politician) with the signup credits, and signs them in. */
  async register(input: NewUser & { workspace_name?: string | undefined }, actor: AuditActor) {
    if (this.deps.config.registration === 'closed')
      throw new AppError(
        'forbidden',
        'Sign-up is closed on this service: ask its operator for an account (ces create-workspace).',
      );
    const user = await this.deps.users.prepare(input);
    const { db, config } = this.deps;
    const now = nowIso();
    const { row, token } = await db.transaction().execute(async (trx) => {
      const workspaceName = input.workspace_name?.trim() || defaultWorkspaceName(user.name);
      const workspaceId = await insertWorkspace(trx, workspaceName, now);
      const row = await this.deps.users.insert(trx, workspaceId, user, 'politician', now);
      await addCredits(trx, workspaceId, config.signupCredits, 'grant', 'signup', now);
      await recordCreated(trx, row, { userId: row.id, ip: actor.ip });
      const token = await this.issueToken(trx, row, 'register', now);
      return { row, token };
    });
    return this.authResult(row, token);
  }

  async login(email: string, password: string) {
    const user = await findUserByEmail(this.deps.db, email.trim().toLowerCase());
    const ok = user ? await verifyPassword(user.password_hash, password) : await verifyDecoy(password);
    if (!user || !ok || user.deactivated_at) throw new AppError('unauthorized', INVALID_CREDENTIALS);
    const token = await this.issueToken(this.deps.db, user, 'login', nowIso());
    return this.authResult(user, token);
  }

  async logout(auth: AuthContext): Promise<void> {
    await revokeToken(this.deps.db, auth.workspaceId, auth.tokenId, nowIso());
    await this.deps.tokenOwners.forgetToken(auth.tokenId);
  }

  /** OTPs being looked up, stored and handed to the provider after send-otp has answered. */
  private readonly pendingOtps = new Set<Promise<void>>();

  /**
   * Sends a 6-digit sign-in code by SMS when the phone belongs to a user. Answers at once, the same either
   * way and before anything depends on the account, so neither the answer nor its timing tells who has an
   * account: looking the phone up, storing the code and the provider's round trip happen afterwards. The
   * code is kept only as an HMAC under APP_KEY.
   */
  sendOtp(phoneInput: string): { expires_in: number } {
    const phone = this.phone(phoneInput);
    if (this.pendingOtps.size >= MAX_PENDING_OTPS) {
      this.deps.log.warn({ pending: this.pendingOtps.size }, 'OTP not sent: too many OTPs in flight');
    } else {
      const task = this.issueOtp(phone).catch((error: unknown) => {
        // The caller was told nothing different (no enumeration); operators see the failure.
        this.deps.log.error({ err: error }, 'OTP could not be sent');
      });
      this.pendingOtps.add(task);
      void task.finally(() => this.pendingOtps.delete(task));
    }
    return { expires_in: this.deps.config.otp.ttlSeconds };
  }

  /** Waits (at most `timeoutMs`) for the OTPs still being sent, at shutdown, so that none is cut off halfway. */
  async settled(timeoutMs = 5000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.pendingOtps]),
      new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs))),
    ]);
    clearTimeout(timer);
  }

  private async issueOtp(phone: string): Promise<void> {
    const { db, config } = this.deps;
    const user = await findUserByPhone(db, phone);
    if (!user || user.deactivated_at) return;
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const now = new Date();
    await insertOtp(db, {
      phone,
      code_hash: this.otpHash(phone, code),
      expires_at: new Date(now.getTime() + config.otp.ttlSeconds * 1000).toISOString(),
      created_at: now.toISOString(),
    });
    const minutes = Math.max(1, Math.round(config.otp.ttlSeconds / 60));
    const route = await this.deps.otpRoute?.(Number(user.workspace_id));
    await (route?.provider ?? this.deps.sms).send({
      channel: 'sms',
      to: phone,
      body: `${code} is your Campaign Engagement sign-in code. It expires in ${minutes} minutes. Do not share it.`,
      // A gateway that sends templates only sends the code through its DLT-registered OTP template, whose
      // variables are ##otp## and ##minutes##.
      ...(route?.templateIds
        ? {
            providerTemplate: {
              ids: route.templateIds,
              language: 'en',
              variables: [
                ['otp', code],
                ['minutes', String(minutes)],
              ],
            },
          }
        : {}),
    });
  }

  async verifyOtp(phoneInput: string, otp: string) {
    const { db, config } = this.deps;
    const phone = this.phone(phoneInput);
    const now = nowIso();
    // The attempt is counted before the code is compared, in one statement, so parallel guesses cannot
    // all be judged against the same count.
    const live = await takeOtpAttempt(db, phone, now, config.otp.maxAttempts);
    if (!live || !digestsEqual(live.code_hash, this.otpHash(phone, otp)))
      throw new AppError('unauthorized', INVALID_OTP);
    const user = await findUserByPhone(db, phone);
    if (!user || user.deactivated_at || !(await consumeOtp(db, live.id, now)))
      throw new AppError('unauthorized', INVALID_OTP);
    const token = await this.issueToken(db, user, 'otp', now);
    return this.authResult(user, token);
  }

  /**
   * Sets a new password with a code that send-otp sent (the same attempt, lifetime and single-use rules as
   * verify-otp), revokes every token of the user and signs them in. A weak password is 422 and leaves the
   * code usable; anything else wrong is 401 as verify-otp.
   */
  async resetPassword(input: { phone: string; code: string; password: string }, actor: AuditActor) {
    const { db, config } = this.deps;
    const phone = this.phone(input.phone);
    const weak = passwordProblem(input.password, {});
    if (weak) throw validationError({ password: [weak] });
    const now = nowIso();
    const live = await takeOtpAttempt(db, phone, now, config.otp.maxAttempts);
    if (!live || !digestsEqual(live.code_hash, this.otpHash(phone, input.code)))
      throw new AppError('unauthorized', INVALID_OTP);
    const user = await findUserByPhone(db, phone);
    if (!user || user.deactivated_at) throw new AppError('unauthorized', INVALID_OTP);
    const own = passwordProblem(input.password, account(user));
    if (own) throw validationError({ password: [own] });
    const passwordHash = await hashPassword(input.password);
    const { row, token } = await db.transaction().execute(async (trx) => {
      if (!(await consumeOtp(trx, live.id, now))) throw new AppError('unauthorized', INVALID_OTP);
      const row = await setPassword(trx, user, passwordHash, now, {
        actor: { userId: user.id, ip: actor.ip },
        action: 'auth.password_reset',
        details: { via: 'otp' },
      });
      return { row, token: await this.issueToken(trx, row, 'password-reset', now) };
    });
    await this.deps.tokenOwners.forgetUser(user.id);
    return this.authResult(row, token);
  }

  /** Changes the caller's password; every other token of theirs is revoked, the calling one kept. */
  async changePassword(
    auth: AuthContext,
    input: { current_password: string; password: string },
    actor: AuditActor,
  ): Promise<void> {
    const { db } = this.deps;
    const user = await findUser(db, auth.workspaceId, auth.userId);
    if (!user) throw new AppError('unauthorized', 'The account no longer exists.');
    if (!(await verifyPassword(user.password_hash, input.current_password)))
      throw validationError({ current_password: ['is not your current password.'] });
    const weak = passwordProblem(input.password, account(user));
    if (weak) throw validationError({ password: [weak] });
    const passwordHash = await hashPassword(input.password);
    await db
      .transaction()
      .execute((trx) =>
        setPassword(
          trx,
          user,
          passwordHash,
          nowIso(),
          { actor, action: 'auth.password_changed', details: null },
          auth.tokenId,
        ),
      );
    await this.deps.tokenOwners.forgetUser(user.id);
  }

  /** The caller's live tokens, newest first; `current` marks the one that made the call. */
  async listTokens(auth: AuthContext, page: number, perPage: number) {
    const { rows, total } = await listLiveTokens(this.deps.db, auth.userId, nowIso(), page, perPage);
    const items = rows.map((row) => ({ ...row, current: row.id === auth.tokenId }));
    return pageResult(items, total, page, perPage);
  }

  /** Revokes one of the caller's live tokens; any other id (someone else's token included) is 404. */
  async revokeOwnToken(auth: AuthContext, tokenId: number): Promise<void> {
    if (!(await revokeUserToken(this.deps.db, auth.userId, tokenId, nowIso())))
      throw new AppError('not_found', 'Token not found.');
    await this.deps.tokenOwners.forgetToken(tokenId);
  }

  /** The caller of `Authorization: Bearer <id>|<secret>`, or null for a missing, unknown, expired or revoked token. */
  async authenticate(authorization: string | undefined): Promise<AuthContext | null> {
    const match = /^Bearer\s+(\d{1,15})\|([A-Za-z0-9_-]{1,100})\s*$/i.exec(authorization ?? '');
    if (!match) return null;
    const owner = await this.deps.tokenOwners.find(Number(match[1]));
    if (!owner) return null;
    if (!digestsEqual(owner.tokenHash, sha256Hex(match[2] ?? ''))) return null;
    if (owner.dead) return null;
    const now = Date.now();
    if (owner.expiresMs !== null && owner.expiresMs <= now) return null;
    if (owner.lastUsedMs < now - TOUCH_EVERY_MS) {
      // Once a minute per token at most; a failed write must not refuse a valid token.
      owner.lastUsedMs = now;
      const at = new Date(now);
      await touchToken(
        this.deps.db,
        owner.tokenId,
        at.toISOString(),
        new Date(now - TOUCH_EVERY_MS).toISOString(),
      ).catch((error: unknown) => this.deps.log.warn({ err: error }, 'could not record token use'));
    }
    return {
      userId: owner.userId,
      workspaceId: owner.workspaceId,
      role: owner.role,
      tokenId: owner.tokenId,
    };
  }

  async currentUser(auth: AuthContext) {
    const user = await findUser(this.deps.db, auth.workspaceId, auth.userId);
    if (!user) throw new AppError('unauthorized', 'The account no longer exists.');
    return { user: userView(user), credits: creditsView(await balances(this.deps.db, auth.workspaceId)) };
  }

  private phone(input: string): string {
    const phone = toE164(input, this.deps.config.defaultCountry);
    if (!phone)
      throw validationError({
        phone: [
          'must be a valid phone number, e.g. +919812345678 (a number without + is read in DEFAULT_COUNTRY).',
        ],
      });
    return phone;
  }

  private otpHash(phone: string, code: string): string {
    return hmacHex(this.deps.config.appKey, `otp:${phone}:${code}`);
  }

  /** A Sanctum-shaped token `<id>|<40 characters>`; only the SHA-256 of the secret is stored. */
  private async issueToken(db: Executor, user: UserRow, name: string, now: string): Promise<string> {
    const secret = randomBytes(30).toString('base64url');
    const ttl = this.deps.config.tokenTtlSeconds;
    const id = await insertToken(db, {
      user_id: user.id,
      workspace_id: user.workspace_id,
      token_hash: sha256Hex(secret),
      name,
      created_at: now,
      expires_at: ttl ? new Date(Date.parse(now) + ttl * 1000).toISOString() : null,
    });
    return `${id}|${secret}`;
  }

  private async authResult(user: UserRow, token: string) {
    return {
      user: userView(user),
      access_token: token,
      token_type: 'Bearer' as const,
      credits: creditsView(await balances(this.deps.db, user.workspace_id)),
    };
  }
}

/**
 * Stores a new password hash, revokes the user's tokens (but `keepTokenId`) and records the audit entry, in
 * the caller's transaction. The CLI's reset-password uses it too.
 */
export async function setPassword(
  trx: Executor,
  user: UserRow,
  passwordHash: string,
  now: string,
  audit: {
    actor: AuditActor;
    action: 'auth.password_changed' | 'auth.password_reset';
    details: Record<string, unknown> | null;
  },
  keepTokenId?: number,
): Promise<UserRow> {
  const row = await updateUser(trx, user.workspace_id, user.id, {
    password_hash: passwordHash,
    updated_at: now,
  });
  const revoked = await revokeUserTokens(trx, user.id, now, keepTokenId);
  await recordAudit(trx, {
    workspaceId: user.workspace_id,
    actor: audit.actor,
    action: audit.action,
    target: { type: 'user', id: user.id },
    details: { ...audit.details, tokens_revoked: revoked },
  });
  return row;
}

/** What a new password must not be: the account's own email, phone or name. */
export function account(user: UserRow) {
  return { email: user.email, name: user.name, phone: user.phone ?? undefined };
}
