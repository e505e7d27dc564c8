import { parseArgs } from 'node:util';
import { defaultKeyFile, loadConfig } from './config.ts';
import { connect, nowIso } from './db/connect.ts';
import { migrateToLatest } from './db/migrate.ts';
import { roles, type Role } from './db/schema.ts';
import { AppError } from './errors.ts';
import { addCredits, balances } from './modules/credits/credits.repository.ts';
import { UsersService } from './modules/users/users.service.ts';
import { userView } from './modules/users/users.schemas.ts';
import { insertWorkspace, workspaceExists } from './modules/workspaces/workspaces.repository.ts';
import { defaultWorkspaceName } from './modules/workspaces/workspaces.rules.ts';

const usage = `Usage: ces <command> [options]   (or: npm run cli -- <command> [options])

Commands:
  migrate                          Apply every pending database migration.
  create-user --name N --email E --password P [--role politician|manager|volunteer]
              [--phone +91...] [--workspace ID | --workspace-name NAME]
                                   Create a user. Without --workspace, a new workspace is made and the user
                                   is its politician. The password may also come from CES_PASSWORD.
  grant-credits --workspace ID [--sms N] [--whatsapp N] [--email N]
                                   Add credits to a workspace (written to the credit ledger as a grant).

Settings come from the same environment as the server (DATABASE_URL, ...).`;

function fail(message: string): never {
  console.error(message);
  process.exit(1);
}

function wholeNumber(value: string | undefined, name: string): number {
  if (value === undefined) return 0;
  if (!/^\d+$/.test(value)) fail(`--${name} must be a whole number, got "${value}"`);
  return Number(value);
}

async function main(): Promise<void> {
  const [command, ...rest] = process.argv.slice(2);
  if (!command || command === 'help' || command === '--help') {
    console.log(usage);
    return;
  }
  const config = loadConfig(process.env, { keyFile: defaultKeyFile() });
  const db = connect(config.databaseUrl, config.database);
  try {
    await migrateToLatest(db.kysely);
    switch (command) {
      case 'migrate':
        console.log(`Migrations applied (${db.dialect}).`);
        break;
      case 'create-user': {
        const { values } = parseArgs({
          args: rest,
          options: {
            name: { type: 'string' },
            email: { type: 'string' },
            password: { type: 'string' },
            phone: { type: 'string' },
            role: { type: 'string', default: 'politician' },
            workspace: { type: 'string' },
            'workspace-name': { type: 'string' },
          },
        });
        const password = values.password ?? process.env.CES_PASSWORD;
        if (!values.name || !values.email || !password)
          fail('create-user needs --name, --email and --password.');
        if (!(roles as readonly string[]).includes(values.role))
          fail(`--role must be one of ${roles.join(', ')}.`);
        if (password.length < 8) fail('The password must have at least 8 characters.');
        const users = new UsersService({ db: db.kysely, config });
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
          return users.insert(trx, workspaceId, prepared, values.role as Role, now);
        });
        console.log(JSON.stringify(userView(row)));
        break;
      }
      case 'grant-credits': {
        const { values } = parseArgs({
          args: rest,
          options: {
            workspace: { type: 'string' },
            sms: { type: 'string' },
            whatsapp: { type: 'string' },
            email: { type: 'string' },
          },
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
        console.log(
          JSON.stringify({ workspace_id: workspaceId, balance: await balances(db.kysely, workspaceId) }),
        );
        break;
      }
      default:
        fail(`Unknown command "${command}".\n\n${usage}`);
    }
  } catch (error) {
    if (error instanceof AppError)
      fail(`${error.message} ${error.details ? JSON.stringify(error.details) : ''}`);
    throw error;
  } finally {
    await db.close();
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
