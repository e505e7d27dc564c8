import type { Kysely } from 'kysely';
import type { Config } from '../../config.ts';
import { nowIso } from '../../db/connect.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { Database, UserRow } from '../../db/schema.ts';
import type { Role } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';
import { AppError, type FieldErrors, validationError } from '../../errors.ts';
import { toE164 } from '../../lib/phone.ts';
import { pageResult } from '../../domain.ts';
import { placeText } from '../../lib/place.ts';
import { unassignOpen } from '../conversations/conversations.thread.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import { hashPassword, passwordProblem } from '../auth/auth.passwords.ts';
import { revokeUserTokens } from '../auth/auth.repository.ts';
import type { AuthChanges } from '../auth/token-owners.ts';
import {
  countOtherActivePoliticians,
  findUser,
  findUserByEmail,
  findUserByPhone,
  insertUser,
  listUsers,
  lockTeam,
  updateUser,
} from './users.repository.ts';
import { type Coverage, userView } from './users.schemas.ts';

export interface UserChanges {
  name?: string | undefined;
  role?: Role | undefined;
  active?: boolean | undefined;
  coverage?: Coverage | undefined;
}

export interface NewUser {
  name: string;
  email: string;
  password: string;
  phone?: string | undefined;
}

export interface PreparedUser {
  name: string;
  email: string;
  phone: string | undefined;
  passwordHash: string;
}

export class UsersService {
  constructor(
    private readonly deps: {
      db: Kysely<Database>;
      config: Pick<Config, 'defaultCountry'>;
      /** Told of every change of a user's role or activity, after it commits. */
      authChanges: AuthChanges;
    },
  ) {}

  /** Checks and normalises a new user's fields (422 naming each bad one) and hashes the password. */
  async prepare(input: NewUser): Promise<PreparedUser> {
    const errors: FieldErrors = {};
    const name = input.name.trim().replace(/\s+/g, ' ');
    if (!name) errors.name = ['must not be empty.'];
    let phone: string | undefined;
    if (input.phone !== undefined) {
      phone = toE164(input.phone, this.deps.config.defaultCountry);
      if (!phone)
        errors.phone = [
          'must be a valid phone number, e.g. +919812345678 (a number without + is read in DEFAULT_COUNTRY).',
        ];
    }
    const weak = passwordProblem(input.password, { email: input.email, phone: phone ?? input.phone, name });
    if (weak) errors.password = [weak];
    if (Object.keys(errors).length > 0) throw validationError(errors);
    const passwordHash = await hashPassword(input.password);
    return { name, email: input.email.trim().toLowerCase(), phone, passwordHash };
  }

  /** Inserts a user in the caller's transaction; a taken email or phone is 409. */
  async insert(
    trx: Executor,
    workspaceId: number,
    input: PreparedUser,
    role: Role,
    now: string,
  ): Promise<UserRow> {
    if (await findUserByEmail(trx, input.email)) throw conflict('email');
    if (input.phone && (await findUserByPhone(trx, input.phone))) throw conflict('phone');
    try {
      return await insertUser(trx, {
        workspace_id: workspaceId,
        name: input.name,
        email: input.email,
        phone: input.phone ?? null,
        password_hash: input.passwordHash,
        role,
        created_at: now,
        updated_at: now,
      });
    } catch (error) {
      // Two requests raced for the same email or phone: the database's unique index decided.
      if (isUniqueViolation(error)) throw conflict('email or phone');
      throw error;
    }
  }

  async createMember(workspaceId: number, input: NewUser & { role: Role }, actor: AuditActor) {
    const clean = await this.prepare(input);
    const row = await this.deps.db.transaction().execute(async (trx) => {
      const row = await this.insert(trx, workspaceId, clean, input.role, nowIso());
      await recordCreated(trx, row, actor);
      return row;
    });
    return userView(row);
  }

  async list(workspaceId: number, page: number, perPage: number, active?: boolean) {
    const { rows, total } = await listUsers(this.deps.db, workspaceId, page, perPage, active);
    return pageResult(rows.map(userView), total, page, perPage);
  }

  async get(workspaceId: number, id: number) {
    const row = await findUser(this.deps.db, workspaceId, id);
    if (!row) throw notFound();
    return userView(row);
  }

  /**
   * Renames, changes the role of, deactivates or reactivates a member. Deactivation revokes every token of
   * theirs in the same transaction. The workspace keeps at least one active politician: the team is locked
   * first, so two politicians demoting each other at once take turns and the second one gets 409.
   */
  async update(workspaceId: number, id: number, changes: UserChanges, actor: AuditActor) {
    const name = changes.name?.trim().replace(/\s+/g, ' ');
    if (changes.name !== undefined && !name) throw validationError({ name: ['must not be empty.'] });
    const row = await this.deps.db.transaction().execute(async (trx) => {
      await lockTeam(trx, workspaceId);
      const user = await findUser(trx, workspaceId, id);
      if (!user) throw notFound();
      const now = nowIso();
      const wasActive = user.deactivated_at === null;
      const role = changes.role ?? user.role;
      const active = changes.active ?? wasActive;
      if (
        user.role === 'politician' &&
        wasActive &&
        (role !== 'politician' || !active) &&
        (await countOtherActivePoliticians(trx, workspaceId, id)) === 0
      ) {
        throw new AppError(
          'conflict',
          'This change would leave the workspace without an active politician. Make another member a politician first.',
        );
      }
      const updated: Record<string, unknown> = {};
      if (name !== undefined && name !== user.name) updated.name = { from: user.name, to: name };
      if (role !== user.role) updated.role = { from: user.role, to: role };
      const deactivating = wasActive && !active;
      const reactivating = !wasActive && active;
      if (reactivating) updated.active = { from: false, to: true };
      const coverage =
        changes.coverage === undefined
          ? user.coverage
          : Object.values(changes.coverage).some((list) => (list ?? []).length > 0)
            ? JSON.stringify({
                wards: (changes.coverage.wards ?? []).map(placeText),
                booths: (changes.coverage.booths ?? []).map(placeText),
                constituencies: (changes.coverage.constituencies ?? []).map(placeText),
              })
            : null;
      if (coverage !== user.coverage) updated.coverage = { to: coverage ? JSON.parse(coverage) : null };
      if (Object.keys(updated).length === 0 && !deactivating) return user;
      const row = await updateUser(trx, workspaceId, id, {
        name: name ?? user.name,
        role,
        deactivated_at: active ? null : (user.deactivated_at ?? now),
        coverage,
        updated_at: now,
      });
      const target = { type: 'user', id };
      if (Object.keys(updated).length > 0) {
        await recordAudit(trx, { workspaceId, actor, action: 'user.updated', target, details: updated });
      }
      if (deactivating) {
        await unassignOpen(trx, workspaceId, id, now);
        const revoked = await revokeUserTokens(trx, id, now);
        await recordAudit(trx, {
          workspaceId,
          actor,
          action: 'user.deactivated',
          target,
          details: { tokens_revoked: revoked },
        });
      }
      return row;
    });
    await this.deps.authChanges.forgetUser(id);
    return userView(row);
  }
}

/** The audit entry of a new user, in the transaction that inserts it. */
export function recordCreated(trx: Executor, row: UserRow, actor: AuditActor): Promise<void> {
  return recordAudit(trx, {
    workspaceId: row.workspace_id,
    actor,
    action: 'user.created',
    target: { type: 'user', id: row.id },
    details: { role: row.role },
  });
}

function notFound(): AppError {
  return new AppError('not_found', 'User not found.');
}

function conflict(field: string): AppError {
  return new AppError('conflict', `An account with this ${field} already exists.`, { field });
}
