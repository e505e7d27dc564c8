import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { Kysely } from 'kysely';
import { type Config, DEFAULT_DATABASE_URL, defaultKeyFile, loadConfig } from './config.ts';
import { connect, type Db, nowIso } from './db/connect.ts';
import { migrateToLatest } from './db/migrate.ts';
import { type Database, type UserRow } from './db/schema.ts';
import { roles, type Role } from './domain.ts';
import { AppError } from './errors.ts';
import { type AuditActor, recordAudit } from './modules/audit/audit.repository.ts';
import { hashPassword, passwordProblem } from './modules/auth/auth.passwords.ts';
import { revokeUserTokens } from './modules/auth/auth.repository.ts';
import { announcer, authChannel } from './modules/auth/token-owners.ts';
import { account, setPassword } from './modules/auth/auth.service.ts';
import { addCredits, balances } from './modules/credits/credits.repository.ts';
import { creditsView } from './modules/credits/credits.schemas.ts';
import { findUser, findUserByEmail } from './modules/users/users.repository.ts';
import { recordCreated, UsersService } from './modules/users/users.service.ts';
import { userView } from './modules/users/users.schemas.ts';
import { insertWorkspace, workspaceExists } from './modules/workspaces/workspaces.repository.ts';
import { defaultWorkspaceName } from './modules/workspaces/workspaces.rules.ts';

/** What the CLI does is the operator's, not a signed-in user's: its audit entries have no actor. */
const OPERATOR: AuditActor = { userId: null, ip: null };

const help: Record<string, string> = {
  migrate: `migrate [--create]
      Apply every pending database migration. A SQLite database that does not exist yet is made only with
      --create (any command takes it).`,
  'create-workspace': `create-workspace --name N --email E --password P [--phone +91...] [--workspace-name W]
      Create a workspace (with the signup credits) and its first user, a politician. For REGISTRATION=closed.
      The password may also come from CES_PASSWORD.`,
  'create-user': `create-user --name N --email E --password P [--role politician|manager|volunteer]
              [--phone +91...] [--workspace ID | --workspace-name NAME]
      Create a user. Without --workspace, a new workspace is made and the user is its politician.
      The password may also come from CES_PASSWORD.`,
  'deactivate-user': `deactivate-user (--email E | --id ID)
      Deactivate a user: every token of theirs is revoked and they can no longer sign in. Refused when it
      would leave their workspace without an active politician. (Reactivate with PATCH /api/users/{id}.)`,
  'reset-password': `reset-password (--email E | --id ID) --password P
      Set a user's password and revoke every token of theirs. The password may also come from CES_PASSWORD.`,
  'revoke-tokens': `revoke-tokens (--email E | --id ID)
      Revoke every token of a user (ends all their sessions); they can sign in again.`,
  'grant-credits': `grant-credits --workspace ID [--sms N] [--whatsapp N] [--email N]
      Add credits to a workspace (written to the credit ledger as a grant).`,
};

const usage = `Usage: ces <command> [options]   (or: npm run cli -- <command> [options])
       ces <command> --help

Commands:
${Object.values(help)
  .map((text) => `  ${text}`)
  .join('\n')}

Settings come from the same environment as the server (DATABASE_URL, ...). The CLI says which database it
uses (on standard error) and never creates a SQLite database that does not exist unless given --create.
Audit-log entries of these commands have no actor (actor_id null).`;

/** Which database the settings name: a SQLite file's absolute path, or a PostgreSQL server and database. */
function databaseOf(env: NodeJS.ProcessEnv): { label: string; file?: string; setting: string } {
  const given = env.DATABASE_URL?.trim();
  const url = given || DEFAULT_DATABASE_URL;
  const setting = given
    ? 'DATABASE_URL'
    : `DATABASE_URL unset: the default ${DEFAULT_DATABASE_URL}, in the current directory`;
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length) || ':memory:';
    if (path === ':memory:') return { label: 'SQLite in memory', setting };
    const file = resolve(path);
    return { label: `SQLite ${file}`, file, setting };
  }
  try {
    const parsed = new URL(url);
    return { label: `PostgreSQL ${parsed.host}${parsed.pathname}`, setting };
  } catch {
    return { label: 'PostgreSQL', setting };
  }
}

function fail(message: string): never {
  console.error(message);
  process.exit(1);
}

function wholeNumber(value: string | undefined, name: string): number {
  if (value === undefined) return 0;
  if (!/^\d+$/.test(value)) fail(`--${name} must be a whole number, got "${value}"`);
  return Number(value);
}

/** parseArgs that turns an unknown or malformed option into a clear message and exit 1. */
function options(
  command: string,
  args: string[],
  spec: Record<string, { type: 'string' }>,
): Record<string, string | undefined> {
  try {
    const { values } = parseArgs({ args, options: spec, strict: true, allowPositionals: false });
    return values as Record<string, string | undefined>;
  } catch (error) {
    fail(`${error instanceof Error ? error.message : String(error)}\n\nUsage: ces ${help[command]}`);
  }
}

const userOptions = { email: { type: 'string' as const }, id: { type: 'string' as const } };

/** The user named by --email or --id (exactly one of them). */
async function userNamed(
  db: Kysely<Database>,
  command: string,
  values: { email?: string | undefined; id?: string | undefined },
) {
  if ((values.email === undefined) === (values.id === undefined))
    fail(`${command} needs exactly one of --email or --id.\n\nUsage: ces ${help[command]}`);
  let user: UserRow | undefined;
  if (values.email !== undefined) {
    user = await findUserByEmail(db, values.email.trim().toLowerCase());
  } else {
    const id = wholeNumber(values.id, 'id');
    const row = await db.selectFrom('users').select('workspace_id').where('id', '=', id).executeTakeFirst();
    user = row ? await findUser(db, row.workspace_id, id) : undefined;
  }
  if (!user)
    fail(`No user with ${values.email !== undefined ? `email ${values.email}` : `id ${values.id}`}.`);
  return user;
}

/** What each command runs with: the migrated database, the settings, the team service and the token announcer. */
interface Cli {
  db: Db;
  config: Readonly<Config>;
  users: UsersService;
  authChanges: ReturnType<typeof announcer>;
}

/** create-workspace and create-user: a user (a politician by default), in a new workspace or a given one. */
async function createUser({ db, config, users }: Cli, command: string, rest: string[]): Promise<void> {
  const values = options(command, rest, {
    name: { type: 'string' },
    email: { type: 'string' },
    password: { type: 'string' },
    phone: { type: 'string' },
    'workspace-name': { type: 'string' },
    ...(command === 'create-user' ? { role: { type: 'string' }, workspace: { type: 'string' } } : {}),
  });
  const role = values.role ?? 'politician';
  const password = values.password ?? process.env.CES_PASSWORD;
  if (!values.name || !values.email || !password)
    fail(`${command} needs --name, --email and --password (or CES_PASSWORD).`);
  if (!(roles as readonly string[]).includes(role)) fail(`--role must be one of ${roles.join(', ')}.`);
  const prepared = await users.prepare({
    name: values.name,
    email: values.email,
    password,
    phone: values.phone,
  });
  const now = nowIso();
  const row = await db.kysely.transaction().execute(async (trx) => {
    let workspaceId: number;
    if (values.workspace) {
      workspaceId = wholeNumber(values.workspace, 'workspace');
      if (!(await workspaceExists(trx, workspaceId))) fail(`Workspace ${workspaceId} does not exist.`);
    } else {
      workspaceId = await insertWorkspace(
        trx,
        values['workspace-name'] ?? defaultWorkspaceName(prepared.name),
        now,
      );
      await addCredits(trx, workspaceId, config.signupCredits, 'grant', 'signup', now);
    }
    const row = await users.insert(trx, workspaceId, prepared, role as Role, now);
    await recordCreated(trx, row, OPERATOR);
    return row;
  });
  console.log(
    JSON.stringify(
      command === 'create-workspace'
        ? { workspace_id: row.workspace_id, user: userView(row) }
        : userView(row),
    ),
  );
}

/** deactivate-user: the user can no longer sign in (audited, without an actor). */
async function deactivateUser({ db, users }: Cli, command: string, rest: string[]): Promise<void> {
  const user = await userNamed(db.kysely, command, options(command, rest, userOptions));
  const row = await users.update(user.workspace_id, user.id, { active: false }, OPERATOR);
  console.log(JSON.stringify(row));
}

/** reset-password: a new password (checked as the API checks it); every token of the user is revoked. */
async function resetPassword({ db, authChanges }: Cli, command: string, rest: string[]): Promise<void> {
  const values = options(command, rest, { ...userOptions, password: { type: 'string' as const } });
  const password = values.password ?? process.env.CES_PASSWORD;
  if (!password) fail('reset-password needs --password (or CES_PASSWORD).');
  const user = await userNamed(db.kysely, command, values);
  const weak = passwordProblem(password, account(user));
  if (weak) fail(`The password ${weak}`);
  const passwordHash = await hashPassword(password);
  await db.kysely.transaction().execute((trx) =>
    setPassword(trx, user, passwordHash, nowIso(), {
      actor: OPERATOR,
      action: 'auth.password_reset',
      details: { via: 'cli' },
    }),
  );
  await authChanges.forgetUser(user.id);
  console.log(JSON.stringify({ user_id: user.id, password_reset: true, tokens_revoked: true }));
}

/** revoke-tokens: every token of the user is revoked, at once in every process. */
async function revokeTokens({ db, authChanges }: Cli, command: string, rest: string[]): Promise<void> {
  const user = await userNamed(db.kysely, command, options(command, rest, userOptions));
  const revoked = await db.kysely.transaction().execute(async (trx) => {
    const revoked = await revokeUserTokens(trx, user.id, nowIso());
    await recordAudit(trx, {
      workspaceId: user.workspace_id,
      actor: OPERATOR,
      action: 'auth.tokens_revoked',
      target: { type: 'user', id: user.id },
      details: { tokens_revoked: revoked },
    });
    return revoked;
  });
  await authChanges.forgetUser(user.id);
  console.log(JSON.stringify({ user_id: user.id, tokens_revoked: revoked }));
}

/** grant-credits: credits added to a workspace, printed as its balance. */
async function grantCredits({ db }: Cli, command: string, rest: string[]): Promise<void> {
  const values = options(command, rest, {
    workspace: { type: 'string' },
    sms: { type: 'string' },
    whatsapp: { type: 'string' },
    email: { type: 'string' },
  });
  const workspaceId = wholeNumber(values.workspace, 'workspace');
  if (!workspaceId || !(await workspaceExists(db.kysely, workspaceId)))
    fail('--workspace must name an existing workspace id.');
  const amounts = {
    sms: wholeNumber(values.sms, 'sms'),
    whatsapp: wholeNumber(values.whatsapp, 'whatsapp'),
    email: wholeNumber(values.email, 'email'),
  };
  await db.kysely
    .transaction()
    .execute((trx) => addCredits(trx, workspaceId, amounts, 'grant', 'cli', nowIso()));
  // The balance in the API's own names (GET /api/credits): sms_credits, whatsapp_credits, email_credits.
  console.log(
    JSON.stringify({
      workspace_id: workspaceId,
      balance: creditsView(await balances(db.kysely, workspaceId)),
    }),
  );
}

const commands: Record<string, (cli: Cli, command: string, rest: string[]) => Promise<void>> = {
  migrate: async ({ db }) => console.log(`Migrations applied (${db.dialect}).`),
  'create-workspace': createUser,
  'create-user': createUser,
  'deactivate-user': deactivateUser,
  'reset-password': resetPassword,
  'revoke-tokens': revokeTokens,
  'grant-credits': grantCredits,
};

async function main(): Promise<void> {
  const [command, ...rest] = process.argv.slice(2);
  if (!command || command === 'help' || command === '--help' || command === '-h') {
    console.log(usage);
    return;
  }
  if (!Object.hasOwn(commands, command)) fail(`Unknown command "${command}".\n\n${usage}`);
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(`Usage: ces ${help[command]}`);
    return;
  }
  // The database the service would use from the same settings, said out loud; a SQLite file that does not
  // exist is not made unless asked (--create): run from the wrong folder, the CLI would otherwise create an
  // empty database and a new key, and report success.
  const create = rest.includes('--create');
  rest.splice(0, rest.length, ...rest.filter((arg) => arg !== '--create'));
  const database = databaseOf(process.env);
  if (database.file && !existsSync(database.file) && !create) {
    fail(
      `No database at ${database.file} (${database.setting}). Run ces with the settings the service runs with ` +
        '(the same DATABASE_URL, or from its working directory), or pass --create to make a new database there.',
    );
  }
  console.error(`Database: ${database.label}${database.file && !existsSync(database.file) ? ' (new)' : ''}`);
  const config = loadConfig(process.env, { keyFile: defaultKeyFile() });
  const db = connect(config.databaseUrl, config.database);
  const authChanges = announcer(config.redisUrl, authChannel(config.redisPrefix));
  try {
    await migrateToLatest(db);
    const users = new UsersService({ db: db.kysely, config, authChanges });
    await commands[command]!({ db, config, users, authChanges }, command, rest);
  } catch (error) {
    if (error instanceof AppError)
      fail(`${error.message} ${error.details ? JSON.stringify(error.details) : ''}`);
    throw error;
  } finally {
    authChanges.close();
    await db.close();
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
