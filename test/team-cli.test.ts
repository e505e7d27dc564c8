import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, call, dialects, expectError, type TestApp, uniqueEmail } from './helpers.ts';

const run = promisify(execFile);

for (const dialect of dialects) {
  describe(`operator CLI for team and access (${dialect})`, () => {
    const dir = mkdtempSync(join(tmpdir(), 'ces-team-cli-'));
    const databaseUrl =
      dialect === 'sqlite' ? `sqlite:${join(dir, 'cli.db')}` : (process.env.TEST_DATABASE_URL as string);
    const env = { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent' };
    const ces = (args: string[], extra: Record<string, string> = {}) =>
      run(process.execPath, ['bin/ces.mjs', ...args], { env: { ...env, ...extra } });
    let t: TestApp;
    beforeAll(async () => {
      await ces(['migrate', '--create']);
      t = await buildTestApp(dialect, { DATABASE_URL: databaseUrl });
    }, 60_000);
    afterAll(async () => {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    });

    const login = (email: string, password: string) =>
      call(t.app, 'POST', '/api/auth/login', { body: { email, password } });

    it(
      'create-workspace, revoke-tokens, reset-password and deactivate-user act as the API would, audited without an actor',
      { timeout: 120_000 },
      async () => {
        const email = uniqueEmail('office');
        const created = JSON.parse(
          (
            await ces(
              [
                'create-workspace',
                '--name',
                'Meera Iyer',
                '--email',
                email,
                '--workspace-name',
                'Ward 12 office',
              ],
              { CES_PASSWORD: 'operator chosen phrase' },
            )
          ).stdout,
        );
        expect(created.user).toMatchObject({ name: 'Meera Iyer', email, role: 'politician', active: true });
        const workspaceId = created.workspace_id as number;
        const owner = await login(email, 'operator chosen phrase');
        expect(owner.status).toBe(200);
        expect(owner.body.data.credits).toEqual({
          sms_credits: 100,
          whatsapp_credits: 100,
          email_credits: 100,
        });

        const volEmail = uniqueEmail('vol');
        await call(t.app, 'POST', '/api/users', {
          token: owner.body.data.access_token,
          body: { name: 'Vol', email: volEmail, password: 'volunteer phrase 1', role: 'volunteer' },
        });
        const vol = (await login(volEmail, 'volunteer phrase 1')).body.data.access_token as string;

        expect(JSON.parse((await ces(['revoke-tokens', '--email', volEmail])).stdout)).toMatchObject({
          tokens_revoked: 1,
        });
        expectError(await call(t.app, 'GET', '/api/user', { token: vol }), 401, 'unauthorized');

        const vol2 = (await login(volEmail, 'volunteer phrase 1')).body.data.access_token as string;
        await ces(['reset-password', '--email', volEmail, '--password', 'reset by operator']);
        expectError(await call(t.app, 'GET', '/api/user', { token: vol2 }), 401, 'unauthorized');
        expectError(await login(volEmail, 'volunteer phrase 1'), 401, 'unauthorized');
        expect((await login(volEmail, 'reset by operator')).status).toBe(200);

        const gone = JSON.parse((await ces(['deactivate-user', '--email', volEmail])).stdout);
        expect(gone).toMatchObject({ email: volEmail, active: false });
        expectError(await login(volEmail, 'reset by operator'), 401, 'unauthorized');

        // The last politician stays.
        await expect(ces(['deactivate-user', '--id', String(created.user.id)])).rejects.toMatchObject({
          code: 1,
          stderr: expect.stringContaining('active politician'),
        });

        const entries = await t.db.kysely
          .selectFrom('audit_log')
          .select(['action', 'actor_id', 'target_id'])
          .where('workspace_id', '=', workspaceId)
          .orderBy('id')
          .execute();
        const byOperator = entries.filter((e) => e.actor_id === null).map((e) => e.action);
        expect(byOperator).toEqual([
          'user.created',
          'auth.tokens_revoked',
          'auth.password_reset',
          'user.deactivated',
        ]);
      },
    );

    it('explains bad input, exits non-zero, and prints help per command', async () => {
      const cases: [string[], string][] = [
        [['create-workspace', '--name', 'X', '--email', uniqueEmail()], '--password'],
        [
          ['create-workspace', '--name', 'X', '--email', uniqueEmail(), '--password', 'password'],
          'commonly used',
        ],
        [['deactivate-user', '--email', 'a@b.c', '--id', '1'], 'exactly one of --email or --id'],
        [['deactivate-user', '--email', uniqueEmail()], 'No user with email'],
        [['revoke-tokens', '--id', 'abc'], 'whole number'],
        [['revoke-tokens', '--user', 'x'], "Unknown option '--user'"],
      ];
      // In parallel: each run starts a Node process.
      await Promise.all(
        cases.map(([args, message]) =>
          expect(ces(args, { CES_PASSWORD: '' })).rejects.toMatchObject({
            code: 1,
            stderr: expect.stringContaining(message),
          }),
        ),
      );
      const [one, all] = await Promise.all([ces(['reset-password', '--help']), ces(['--help'])]);
      expect(one.stdout).toContain('Usage: ces reset-password');
      for (const command of ['create-workspace', 'deactivate-user', 'reset-password', 'revoke-tokens'])
        expect(all.stdout).toContain(command);
    }, 120_000);
  });
}
