import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sha256Hex } from '../src/lib/crypto.ts';
import {
  buildTestApp,
  call,
  dialects,
  expectError,
  register,
  type TestApp,
  uniqueEmail,
  uniquePhone,
} from './helpers.ts';

for (const dialect of dialects) {
  describe(`auth (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
    });
    afterAll(() => t.close());

    describe('register', () => {
      it('creates a workspace whose first user is a politician with the signup credits', async () => {
        const email = uniqueEmail();
        const res = await call(t.app, 'POST', '/api/auth/register', {
          body: {
            name: '  Asha   Rao ',
            email: email.toUpperCase(),
            password: 'campaign office 2026',
            phone: uniquePhone(),
          },
        });
        expect(res.status).toBe(201);
        expect(res.body.success).toBe(true);
        expect(res.body.data.token_type).toBe('Bearer');
        expect(res.body.data.access_token).toMatch(/^\d+\|[A-Za-z0-9_-]{40}$/);
        expect(res.body.data.user).toMatchObject({ name: 'Asha Rao', email, role: 'politician' });
        expect(res.body.data.user.workspace_id).toEqual(expect.any(Number));
        expect(res.body.data.credits).toEqual({
          sms_credits: 100,
          whatsapp_credits: 100,
          email_credits: 100,
        });
      });

      it('reads a national phone number in DEFAULT_COUNTRY and stores it in E.164', async () => {
        const national = uniquePhone().slice(3);
        const account = await register(t.app, { phone: national });
        expect(account.user.phone).toBe(`+91${national}`);
      });

      it('stores only a SHA-256 of the token secret and an argon2id password hash', async () => {
        const account = await register(t.app);
        const [id, secret] = account.token.split('|') as [string, string];
        const row = await t.db.kysely
          .selectFrom('api_tokens')
          .selectAll()
          .where('id', '=', Number(id))
          .executeTakeFirstOrThrow();
        expect(row.token_hash).toBe(sha256Hex(secret));
        expect(JSON.stringify(row)).not.toContain(secret);
        const user = await t.db.kysely
          .selectFrom('users')
          .select('password_hash')
          .where('id', '=', account.user.id)
          .executeTakeFirstOrThrow();
        expect(user.password_hash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
      });

      it('answers 409 conflict for a taken email (any case) or phone', async () => {
        const account = await register(t.app);
        const sameEmail = await call(t.app, 'POST', '/api/auth/register', {
          body: { name: 'B', email: account.user.email.toUpperCase(), password: 'campaign office 2026' },
        });
        expectError(sameEmail, 409, 'conflict');
        const samePhone = await call(t.app, 'POST', '/api/auth/register', {
          body: {
            name: 'B',
            email: uniqueEmail(),
            password: 'campaign office 2026',
            phone: account.user.phone,
          },
        });
        expectError(samePhone, 409, 'conflict');
      });

      it('names every bad field in details', async () => {
        const res = await call(t.app, 'POST', '/api/auth/register', {
          body: { name: 5, email: 'not-an-email', password: 'short', phone: '12', role: 'manager' },
        });
        expectError(res, 422, 'validation_error');
        expect(res.body.details).toMatchObject({
          name: ['must be a string.'],
          email: ['must be a valid email address.'],
          password: ['must be at least 8 characters.'],
          role: ['is not an allowed field.'],
        });
      });

      it('reports missing fields, oversized values and a bad phone', async () => {
        const missing = await call(t.app, 'POST', '/api/auth/register', { body: {} });
        expectError(missing, 422, 'validation_error');
        expect(Object.keys(missing.body.details).sort()).toEqual(['email', 'name', 'password']);
        const long = await call(t.app, 'POST', '/api/auth/register', {
          body: { name: 'x'.repeat(201), email: uniqueEmail(), password: 'campaign office 2026' },
        });
        expect(long.body.details).toEqual({ name: ['must be at most 200 characters.'] });
        const phone = await call(t.app, 'POST', '/api/auth/register', {
          body: { name: 'A', email: uniqueEmail(), password: 'campaign office 2026', phone: '+91 12' },
        });
        expectError(phone, 422, 'validation_error');
        expect(Object.keys(phone.body.details)).toEqual(['phone']);
        const blank = await call(t.app, 'POST', '/api/auth/register', {
          body: { name: '   ', email: uniqueEmail(), password: 'campaign office 2026' },
        });
        expect(blank.body.details).toEqual({ name: ['must not be empty.'] });
      });

      it('rejects a body that is not a JSON object', async () => {
        expectError(
          await call(t.app, 'POST', '/api/auth/register', { body: '[1,2]' }),
          422,
          'validation_error',
        );
        expectError(
          await call(t.app, 'POST', '/api/auth/register', { body: 'null' }),
          422,
          'validation_error',
        );
      });
    });

    describe('login', () => {
      it('signs in with email and password and returns the login shape', async () => {
        const account = await register(t.app);
        const res = await call(t.app, 'POST', '/api/auth/login', {
          body: { email: account.user.email.toUpperCase(), password: account.password },
        });
        expect(res.status).toBe(200);
        expect(res.body).toMatchObject({ success: true, message: expect.any(String) });
        expect(res.body.data).toMatchObject({ user: account.user, token_type: 'Bearer' });
        expect(res.body.data.credits).toEqual({
          sms_credits: 100,
          whatsapp_credits: 100,
          email_credits: 100,
        });
        expect(res.body.data.access_token).not.toBe(account.token);
      });

      it('answers a wrong password and an unknown email the same way', async () => {
        const account = await register(t.app);
        const wrong = await call(t.app, 'POST', '/api/auth/login', {
          body: { email: account.user.email, password: 'nope nope' },
        });
        const unknown = await call(t.app, 'POST', '/api/auth/login', {
          body: { email: uniqueEmail(), password: 'nope nope' },
        });
        expectError(wrong, 401, 'unauthorized');
        expectError(unknown, 401, 'unauthorized');
        expect(wrong.body).toEqual(unknown.body);
      });

      it('validates its body', async () => {
        const res = await call(t.app, 'POST', '/api/auth/login', { body: { email: 'a@b.co' } });
        expectError(res, 422, 'validation_error');
        expect(res.body.details).toEqual({ password: ['is required.'] });
      });
    });

    describe('tokens', () => {
      it('GET /api/user returns the user and credits', async () => {
        const account = await register(t.app);
        const res = await call(t.app, 'GET', '/api/user', { token: account.token });
        expect(res.status).toBe(200);
        expect(res.body.data).toEqual({
          user: account.user,
          credits: { sms_credits: 100, whatsapp_credits: 100, email_credits: 100 },
        });
      });

      it('refuses a missing, malformed, unknown or tampered token with 401', async () => {
        const account = await register(t.app);
        const [id, secret] = account.token.split('|') as [string, string];
        const tampered = `${id}|${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`;
        for (const token of [
          undefined,
          'garbage',
          '999999999|abc',
          tampered,
          `${Number(id) + 100000}|${secret}`,
        ]) {
          expectError(await call(t.app, 'GET', '/api/user', token ? { token } : {}), 401, 'unauthorized');
        }
        expectError(
          await call(t.app, 'GET', '/api/user', { headers: { authorization: `Basic ${account.token}` } }),
          401,
          'unauthorized',
        );
      });

      it('logout revokes only the calling token', async () => {
        const account = await register(t.app);
        const second = await call(t.app, 'POST', '/api/auth/login', {
          body: { email: account.user.email, password: account.password },
        });
        const other = second.body.data.access_token as string;
        const out = await call(t.app, 'POST', '/api/auth/logout', { token: account.token });
        expect(out.status).toBe(200);
        expect(out.body).toEqual({ success: true, message: expect.any(String) });
        expectError(await call(t.app, 'GET', '/api/user', { token: account.token }), 401, 'unauthorized');
        expectError(
          await call(t.app, 'POST', '/api/auth/logout', { token: account.token }),
          401,
          'unauthorized',
        );
        expect((await call(t.app, 'GET', '/api/user', { token: other })).status).toBe(200);
      });

      it('logout accepts an empty JSON body', async () => {
        const account = await register(t.app);
        const res = await call(t.app, 'POST', '/api/auth/logout', {
          token: account.token,
          headers: { 'content-type': 'application/json' },
          body: '',
        });
        expect(res.status).toBe(200);
      });
    });

    describe('OTP sign-in', () => {
      // send-otp answers before the code is sent (no timing oracle): wait for the n-th SMS to the phone.
      const lastCode = async (to: string, nth = 1) => {
        const sent = await vi.waitFor(() => {
          const all = t.providers.sms.sent.filter((m) => m.to === to);
          if (all.length < nth) throw new Error(`no SMS #${nth} to ${to} yet`);
          return all[nth - 1];
        });
        return /\b(\d{6})\b/.exec(sent?.body ?? '')?.[1];
      };

      it('sends a 6-digit code by SMS and signs in with it once', async () => {
        const account = await register(t.app);
        const phone = account.user.phone as string;
        const sent = await call(t.app, 'POST', '/api/auth/send-otp', { body: { phone } });
        expect(sent.status).toBe(200);
        expect(sent.body.data).toEqual({ expires_in: 300 });
        const code = await lastCode(phone);
        expect(code).toMatch(/^\d{6}$/);
        const row = await t.db.kysely
          .selectFrom('otp_codes')
          .selectAll()
          .where('phone', '=', phone)
          .executeTakeFirstOrThrow();
        expect(row.code_hash).not.toContain(code);
        const ok = await call(t.app, 'POST', '/api/auth/verify-otp', { body: { phone, otp: code } });
        expect(ok.status).toBe(200);
        expect(ok.body.data).toMatchObject({ user: account.user, token_type: 'Bearer' });
        expect((await call(t.app, 'GET', '/api/user', { token: ok.body.data.access_token })).status).toBe(
          200,
        );
        expectError(
          await call(t.app, 'POST', '/api/auth/verify-otp', { body: { phone, otp: code } }),
          401,
          'unauthorized',
        );
      });

      it('answers an unknown phone exactly as a known one and sends nothing', async () => {
        const account = await register(t.app);
        const stranger = uniquePhone();
        const before = t.providers.sms.sent.length;
        const known = await call(t.app, 'POST', '/api/auth/send-otp', {
          body: { phone: account.user.phone },
        });
        const unknown = await call(t.app, 'POST', '/api/auth/send-otp', { body: { phone: stranger } });
        expect(unknown.status).toBe(known.status);
        expect(unknown.body).toEqual(known.body);
        await lastCode(account.user.phone as string);
        await new Promise((resolve) => setTimeout(resolve, 100));
        expect(t.providers.sms.sent.length).toBe(before + 1);
        expect(t.providers.sms.sent.some((m) => m.to === stranger)).toBe(false);
        expectError(
          await call(t.app, 'POST', '/api/auth/verify-otp', { body: { phone: stranger, otp: '123456' } }),
          401,
          'unauthorized',
        );
      });

      it('locks the code after OTP_MAX_ATTEMPTS wrong tries', async () => {
        const account = await register(t.app);
        const phone = account.user.phone as string;
        await call(t.app, 'POST', '/api/auth/send-otp', { body: { phone } });
        const code = (await lastCode(phone)) as string;
        const wrong = code === '000000' ? '111111' : '000000';
        for (let i = 0; i < 5; i++) {
          expectError(
            await call(t.app, 'POST', '/api/auth/verify-otp', { body: { phone, otp: wrong } }),
            401,
            'unauthorized',
          );
        }
        expectError(
          await call(t.app, 'POST', '/api/auth/verify-otp', { body: { phone, otp: code } }),
          401,
          'unauthorized',
        );
      });

      it('refuses an expired code and a code replaced by a newer one', async () => {
        const account = await register(t.app);
        const phone = account.user.phone as string;
        await call(t.app, 'POST', '/api/auth/send-otp', { body: { phone } });
        const first = (await lastCode(phone, 1)) as string;
        await call(t.app, 'POST', '/api/auth/send-otp', { body: { phone } });
        const second = (await lastCode(phone, 2)) as string;
        if (first !== second) {
          expectError(
            await call(t.app, 'POST', '/api/auth/verify-otp', { body: { phone, otp: first } }),
            401,
            'unauthorized',
          );
        }
        await t.db.kysely
          .updateTable('otp_codes')
          .set({ expires_at: new Date(Date.now() - 1000).toISOString() })
          .where('phone', '=', phone)
          .execute();
        expectError(
          await call(t.app, 'POST', '/api/auth/verify-otp', { body: { phone, otp: second } }),
          401,
          'unauthorized',
        );
      });

      it('validates phone and otp', async () => {
        const res = await call(t.app, 'POST', '/api/auth/verify-otp', {
          body: { phone: 'abc', otp: '12ab56' },
        });
        expectError(res, 422, 'validation_error');
        expect(res.body.details.otp).toEqual(['has an invalid format.']);
        const badPhone = await call(t.app, 'POST', '/api/auth/send-otp', { body: { phone: 'not a phone' } });
        expectError(badPhone, 422, 'validation_error');
        expect(Object.keys(badPhone.body.details)).toEqual(['phone']);
      });
    });
  });
}

describe('token expiry', () => {
  it('refuses a token older than TOKEN_TTL_SECONDS', async () => {
    const t = await buildTestApp('sqlite', { TOKEN_TTL_SECONDS: '60' });
    try {
      const account = await register(t.app);
      expect((await call(t.app, 'GET', '/api/user', { token: account.token })).status).toBe(200);
      // The clock moves past the token's lifetime (its owner is still kept by the process, as in production).
      vi.useFakeTimers({ toFake: ['Date'] });
      vi.setSystemTime(Date.now() + 61_000);
      expectError(await call(t.app, 'GET', '/api/user', { token: account.token }), 401, 'unauthorized');
    } finally {
      vi.useRealTimers();
      await t.close();
    }
  });
});
