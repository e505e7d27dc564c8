import type { Kysely } from 'kysely';
import type { Config } from '../../config.ts';
import { nowIso } from '../../db/connect.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { Database, Role, UserRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { AppError, type FieldErrors, validationError } from '../../errors.ts';
import { toE164 } from '../../lib/phone.ts';
import { pageResult } from '../../http/schemas.ts';
import { hashPassword, passwordProblem } from '../auth/auth.passwords.ts';
import { findUserByEmail, findUserByPhone, insertUser, listUsers } from './users.repository.ts';
import { userView } from './users.schemas.ts';

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
  constructor(private readonly deps: { db: Kysely<Database>; config: Pick<Config, 'defaultCountry'> }) {}

  /** Checks and normalises a new user's fields (422 naming each bad one) and hashes the password. */
  async prepare(input: NewUser): Promise<PreparedUser> {
    const errors: FieldErrors = {};
    const name = input.name.trim().replace(/\s+/g, ' ');
    if (!name) errors.name = ['must not be empty.'];
    let phone: string | undefined;
    if (input.phone !== undefined) {
      phone = toE164(input.phone, this.deps.config.defaultCountry);
      if (!phone) errors.phone = ['must be a valid phone number with country code, e.g. +919812345678.'];
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

  async createMember(workspaceId: number, input: NewUser & { role: 'manager' | 'volunteer' }) {
    const clean = await this.prepare(input);
    const row = await this.deps.db
      .transaction()
      .execute((trx) => this.insert(trx, workspaceId, clean, input.role, nowIso()));
    return userView(row);
  }

  async list(workspaceId: number, page: number, perPage: number) {
    const { rows, total } = await listUsers(this.deps.db, workspaceId, page, perPage);
    return pageResult(rows.map(userView), total, page, perPage);
  }
}

function conflict(field: string): AppError {
  return new AppError('conflict', `An account with this ${field} already exists.`, { field });
}
