import { describe, expect, it, vi } from 'vitest';
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

    it('every 401 carries WWW-Authenticate: Bearer; an Authorization header of another scheme is told so', async () => {
      const t = await buildTestApp(dialect);
      try {
        const none = await call(t.app, 'GET', '/api/user');
        expectError(none, 401, 'unauthorized');
        expect(none.headers['www-authenticate']).toBe('Bearer');
        const basic = await call(t.app, 'GET', '/api/user', {
          headers: { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` },
        });
        expectError(basic, 401, 'unauthorized');
        expect(basic.headers['www-authenticate']).toBe('Bearer');
        expect(basic.body.message).toMatch(/Basic scheme: send Authorization: Bearer/);
        const forged = await call(t.app, 'GET', '/api/user', { token: '1|nope' });
        expectError(forged, 401, 'unauthorized');
        expect(forged.headers['www-authenticate']).toBe('Bearer');
        expect(forged.body.message).toMatch(/invalid, expired or revoked/);
        const login = await call(t.app, 'POST', '/api/auth/login', {
          body: { email: uniqueEmail(), password: 'not the password' },
        });
        expectError(login, 401, 'unauthorized');
        expect(login.headers['www-authenticate']).toBe('Bearer');
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
        const sms = await vi.waitFor(() => {
          const sent = t.providers.sms.sent.find((m) => m.to === phone);
          if (!sent) throw new Error('no SMS yet');
          return sent;
        });
        const code = /\b(\d{6})\b/.exec(sms.body)?.[1] as string;
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

    it('send-otp answers before a slow SMS provider finishes, as fast for a registered phone as for an unknown one', async () => {
      let release = () => {};
      const t = await buildTestApp(dialect);
      try {
        const account = await register(t.app);
        const phone = account.user.phone as string;
        // A real provider's round trip, held open until the test lets it finish.
        const sms = t.providers.sms;
        const send = sms.send.bind(sms);
        const gate = new Promise<void>((resolve) => (release = resolve));
        let finished = 0;
        sms.send = async (message) => {
          await gate;
          const result = await send(message);
          finished += 1;
          return result;
        };
        const timed = async (body: unknown) => {
          const started = performance.now();
          const res = await Promise.race([
            call(t.app, 'POST', '/api/auth/send-otp', { body }),
            new Promise<{ status: number; body: unknown }>((resolve) =>
              setTimeout(() => resolve({ status: 0, body: 'no answer within 1 s' }), 1000),
            ),
          ]);
          return { res, ms: performance.now() - started };
        };
        // Warm up both paths once, then compare.
        await timed({ phone: uniquePhone() });
        const known = await timed({ phone });
        const unknown = await timed({ phone: uniquePhone() });
        expect(known.res.status).toBe(200);
        expect(known.res.body).toEqual(unknown.res.body);
        expect(finished).toBe(0);
        expect(known.ms).toBeLessThan(500);
        expect(Math.abs(known.ms - unknown.ms)).toBeLessThan(100);
        release();
        await vi.waitFor(() => expect(sms.sent.filter((m) => m.to === phone)).toHaveLength(1));
        expect(finished).toBe(1);
      } finally {
        release();
        await t.close();
      }
    });

    it('register takes as long for a taken email as for a new one (the password is hashed first)', async () => {
      const t = await buildTestApp(dialect);
      try {
        const account = await register(t.app);
        const timed = async (email: string) => {
          const started = performance.now();
          const res = await call(t.app, 'POST', '/api/auth/register', {
            body: { name: 'B', email, password: 'a long unusual phrase' },
          });
          return { status: res.status, ms: performance.now() - started };
        };
        await timed(uniqueEmail());
        const taken: number[] = [];
        const fresh: number[] = [];
        for (let i = 0; i < 5; i++) {
          const a = await timed(account.user.email);
          expect(a.status).toBe(409);
          taken.push(a.ms);
          fresh.push((await timed(uniqueEmail())).ms);
        }
        const median = (xs: number[]) => xs.sort((x, y) => x - y)[2] as number;
        // Both include one argon2id hash (several ms); the taken email must not skip it.
        expect(median(taken)).toBeGreaterThan(median(fresh) * 0.4);
      } finally {
        await t.close();
      }
    });
  });
}
