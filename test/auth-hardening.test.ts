import { describe, expect, it } from 'vitest';
import { buildTestApp, call, dialects, expectError, register, uniqueEmail, uniquePhone } from './helpers.ts';

for (const dialect of dialects) {
  describe(`auth hardening (${dialect})`, () => {
    it('registers a 200-character name without workspace_name: the default workspace name fits its column', async () => {
      const t = await buildTestApp(dialect);
      try {
        for (const name of ['N'.repeat(195), 'N'.repeat(200), `${'ब'.repeat(190)}😀😀`]) {
          const res = await call(t.app, 'POST', '/api/auth/register', {
            body: { name, email: uniqueEmail(), password: 'a long unusual phrase', phone: uniquePhone() },
          });
          expect(res.status, res.raw).toBe(201);
          const row = await t.db.kysely
            .selectFrom('workspaces')
            .select('name')
            .where('id', '=', res.body.data.user.workspace_id)
            .executeTakeFirstOrThrow();
          expect([...row.name].length).toBeLessThanOrEqual(200);
          expect(row.name.endsWith("'s campaign")).toBe(true);
        }
      } finally {
        await t.close();
      }
    });

    it('judges at most OTP_MAX_ATTEMPTS of many parallel verify-otp guesses on one code', async () => {
      const t = await buildTestApp(dialect);
      try {
        const account = await register(t.app);
        const phone = account.user.phone as string;
        expect((await call(t.app, 'POST', '/api/auth/send-otp', { body: { phone } })).status).toBe(200);
        const code = /\b(\d{6})\b/.exec(t.providers.sms.sent.at(-1)?.body ?? '')?.[1] as string;
        const guesses = Array.from({ length: 59 }, (_, i) =>
          String((Number(code) + 1 + i) % 1_000_000).padStart(6, '0'),
        );
        guesses.push(code);
        const answers = await Promise.all(
          guesses.map((otp) => call(t.app, 'POST', '/api/auth/verify-otp', { body: { phone, otp } })),
        );
        const row = await t.db.kysely
          .selectFrom('otp_codes')
          .select('attempts')
          .where('phone', '=', phone)
          .orderBy('id', 'desc')
          .executeTakeFirstOrThrow();
        expect(Number(row.attempts)).toBeLessThanOrEqual(t.config.otp.maxAttempts);
        expect(answers.filter((a) => a.status === 200).length).toBeLessThanOrEqual(1);
        expect(answers.every((a) => a.status === 200 || a.status === 401)).toBe(true);
        // Locked or used: the right code no longer signs in.
        expect(
          (await call(t.app, 'POST', '/api/auth/verify-otp', { body: { phone, otp: code } })).status,
        ).toBe(401);
      } finally {
        await t.close();
      }
    });

    it('refuses weak passwords wherever a password is set (register, team members), saying what to fix', async () => {
      const t = await buildTestApp(dialect);
      try {
        const owner = await register(t.app);
        const email = uniqueEmail('weak');
        const phone = uniquePhone();
        const name = 'Asha Rao Kumar';
        const weak = [
          '12345678',
          '        ',
          ' \t      \n ',
          'Password123',
          'qwertyuiop',
          'iloveyou',
          'aaaaaaaaaaaa',
          email.toUpperCase(),
          phone,
          phone.slice(3),
          'asha  rao kumar',
        ];
        for (const password of weak) {
          const registered = await call(t.app, 'POST', '/api/auth/register', {
            body: { name, email, password, phone },
          });
          expectError(registered, 422, 'validation_error');
          expect(registered.body.details.password, password).toHaveLength(1);
          expect(registered.body.details.password[0]).toMatch(
            /password|characters|repeated|phone|email|name/,
          );
          const member = await call(t.app, 'POST', '/api/users', {
            token: owner.token,
            body: { name, email, password, phone, role: 'volunteer' },
          });
          expectError(member, 422, 'validation_error');
          expect(Object.keys(member.body.details)).toEqual(['password']);
        }
        const ok = await call(t.app, 'POST', '/api/auth/register', {
          body: { name, email, password: 'rao kumar for ward 12', phone },
        });
        expect(ok.status, ok.raw).toBe(201);
      } finally {
        await t.close();
      }
    });
  });
}
