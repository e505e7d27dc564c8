import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { connect } from '../src/db/connect.ts';
import { call, uniqueEmail } from './helpers.ts';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'ces-cli-'));
const env = { ...process.env, DATABASE_URL: `sqlite:${join(dir, 'cli.db')}`, LOG_LEVEL: 'silent' };
// The sources through tsx (not bin/ces.mjs, which prefers a build in dist/ that may be older than src/).
const ces = (...args: string[]) => run(process.execPath, ['--import', 'tsx', 'src/cli.ts', ...args], { env });

describe('operator CLI', () => {
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('never creates a database unless asked: where none exists it names the path and exits non-zero', async () => {
    const file = join(dir, 'cli.db');
    const refused = await ces('migrate').catch((error: { code: number; stderr: string }) => error);
    expect((refused as { code: number }).code).toBe(1);
    expect((refused as { stderr: string }).stderr).toContain(`No database at ${file}`);
    expect((refused as { stderr: string }).stderr).toContain('--create');
    expect(existsSync(file)).toBe(false);
    const created = await ces('migrate', '--create');
    expect(created.stdout).toContain('Migrations applied (sqlite)');
    expect(created.stderr).toContain(`Database: SQLite ${file} (new)`);
    expect(existsSync(file)).toBe(true);
    // From then on it says which database it uses.
    expect((await ces('migrate')).stderr).toContain(`Database: SQLite ${file}`);
  });

  it('migrates, creates users and grants credits that the API then shows', async () => {
    expect((await ces('migrate')).stdout).toContain('Migrations applied (sqlite)');
    const email = uniqueEmail('cli');
    const created = JSON.parse(
      (await ces('create-user', '--name', 'Meera Iyer', '--email', email, '--password', 'cli password 1'))
        .stdout,
    );
    expect(created).toMatchObject({ name: 'Meera Iyer', email, role: 'politician' });
    const volunteer = JSON.parse(
      (
        await ces(
          'create-user',
          '--name',
          'Vol',
          '--email',
          uniqueEmail('v'),
          '--password',
          'cli password 2',
          '--role',
          'volunteer',
          '--workspace',
          String(created.workspace_id),
        )
      ).stdout,
    );
    expect(volunteer).toMatchObject({ role: 'volunteer', workspace_id: created.workspace_id });
    const granted = JSON.parse(
      (
        await ces(
          'grant-credits',
          '--workspace',
          String(created.workspace_id),
          '--sms',
          '500',
          '--email',
          '7',
        )
      ).stdout,
    );
    expect(granted.balance).toEqual({ sms_credits: 600, whatsapp_credits: 100, email_credits: 107 });

    const config = loadConfig({ DATABASE_URL: env.DATABASE_URL, LOG_LEVEL: 'silent' });
    const db = connect(config.databaseUrl);
    const app = await buildApp({ config, db });
    try {
      const login = await call(app, 'POST', '/api/auth/login', {
        body: { email, password: 'cli password 1' },
      });
      expect(login.status).toBe(200);
      expect(login.body.data.credits).toEqual({
        sms_credits: 600,
        whatsapp_credits: 100,
        email_credits: 107,
      });
    } finally {
      await app.close();
      await db.close();
    }
  });

  it('explains bad input and exits non-zero', async () => {
    await expect(ces('grant-credits', '--workspace', '999999', '--sms', '5')).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining('existing workspace'),
    });
    await expect(ces('create-user', '--name', 'X')).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining('--email'),
    });
    await expect(ces('frobnicate')).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining('Unknown command'),
    });
  });
});
