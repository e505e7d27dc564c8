import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  addMember,
  buildTestApp,
  call,
  dialects,
  expectError,
  register,
  type TestApp,
  uniqueEmail,
} from './helpers.ts';

for (const dialect of dialects) {
  describe(`passwords and sessions (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      // A lifetime set on purpose (the default, 0, is no expiry: see the test below).
      t = await buildTestApp(dialect, { TOKEN_TTL_SECONDS: '2592000' });
    });
    afterAll(() => t.close());

    const lastCode = async (to: string, nth = 1) => {
      const sent = await vi.waitFor(() => {
        const all = t.providers.sms.sent.filter((m) => m.to === to);
        if (all.length < nth) throw new Error(`no SMS #${nth} to ${to} yet`);
        return all[nth - 1];
      });
      return /\b(\d{6})\b/.exec(sent?.body ?? '')?.[1] ?? '';
    };
    const login = (email: string, password: string) =>
      call(t.app, 'POST', '/api/auth/login', { body: { email, password } });

    it('POST /api/user/password changes the password, keeps the calling token and revokes the others', async () => {
      const account = await register(t.app);
      const other = (await login(account.user.email, account.password)).body.data.access_token as string;
      const wrong = await call(t.app, 'POST', '/api/user/password', {
        token: account.token,
        body: { current_password: 'not it at all', password: 'a brand new phrase' },
      });
      expectError(wrong, 422, 'validation_error');
      expect(Object.keys(wrong.body.details)).toEqual(['current_password']);
      for (const password of ['short', 'password', account.user.email]) {
        const weak = await call(t.app, 'POST', '/api/user/password', {
          token: account.token,
          body: { current_password: account.password, password },
        });
        expectError(weak, 422, 'validation_error');
        expect(Object.keys(weak.body.details)).toEqual(['password']);
      }
      expect((await call(t.app, 'GET', '/api/user', { token: other })).status).toBe(200);

      const ok = await call(t.app, 'POST', '/api/user/password', {
        token: account.token,
        body: { current_password: account.password, password: 'a brand new phrase' },
      });
      expect(ok.status).toBe(200);
      expect((await call(t.app, 'GET', '/api/user', { token: account.token })).status).toBe(200);
      expectError(await call(t.app, 'GET', '/api/user', { token: other }), 401, 'unauthorized');
      expectError(await login(account.user.email, account.password), 401, 'unauthorized');
      expect((await login(account.user.email, 'a brand new phrase')).status).toBe(200);
      expectError(
        await call(t.app, 'POST', '/api/user/password', {
          body: { current_password: 'x', password: 'a brand new phrase' },
        }),
        401,
        'unauthorized',
      );
    });

    it('POST /api/auth/reset-password sets the password with an OTP code, once, and revokes every token', async () => {
      const account = await register(t.app);
      const phone = account.user.phone as string;
      await call(t.app, 'POST', '/api/auth/send-otp', { body: { phone } });
      const code = await lastCode(phone);
      const wrongCode = code === '000000' ? '111111' : '000000';
      expectError(
        await call(t.app, 'POST', '/api/auth/reset-password', {
          body: { phone, code: wrongCode, password: 'reset phrase 2026' },
        }),
        401,
        'unauthorized',
      );
      // A weak password is 422 and leaves the code usable.
      const weak = await call(t.app, 'POST', '/api/auth/reset-password', {
        body: { phone, code, password: '12345678' },
      });
      expectError(weak, 422, 'validation_error');
      const ok = await call(t.app, 'POST', '/api/auth/reset-password', {
        body: { phone, code, password: 'reset phrase 2026' },
      });
      expect(ok.status).toBe(200);
      expect(ok.body.data).toMatchObject({ user: { id: account.user.id }, token_type: 'Bearer' });
      expect((await call(t.app, 'GET', '/api/user', { token: ok.body.data.access_token })).status).toBe(200);
      expectError(await call(t.app, 'GET', '/api/user', { token: account.token }), 401, 'unauthorized');
      expect((await login(account.user.email, 'reset phrase 2026')).status).toBe(200);
      expectError(await login(account.user.email, account.password), 401, 'unauthorized');
      // Single use.
      const again = await call(t.app, 'POST', '/api/auth/reset-password', {
        body: { phone, code, password: 'another phrase 2026' },
      });
      expectError(again, 401, 'unauthorized');
      const verify = await call(t.app, 'POST', '/api/auth/verify-otp', { body: { phone, otp: wrongCode } });
      expect(again.body.message).toBe(verify.body.message);
    });

    it('reset-password takes attempts from the same budget as verify-otp', async () => {
      const local = await buildTestApp(dialect, { OTP_MAX_ATTEMPTS: '2' });
      try {
        const account = await register(local.app);
        const phone = account.user.phone as string;
        await call(local.app, 'POST', '/api/auth/send-otp', { body: { phone } });
        const sent = await vi.waitFor(() => {
          const m = local.providers.sms.sent.find((x) => x.to === phone);
          if (!m) throw new Error('no SMS yet');
          return m;
        });
        const code = /\b(\d{6})\b/.exec(sent.body)?.[1] ?? '';
        const wrong = code === '000000' ? '111111' : '000000';
        await call(local.app, 'POST', '/api/auth/verify-otp', { body: { phone, otp: wrong } });
        await call(local.app, 'POST', '/api/auth/reset-password', {
          body: { phone, code: wrong, password: 'reset phrase 2026' },
        });
        expectError(
          await call(local.app, 'POST', '/api/auth/reset-password', {
            body: { phone, code, password: 'reset phrase 2026' },
          }),
          401,
          'unauthorized',
        );
      } finally {
        await local.close();
      }
    });

    it('by default tokens do not expire (TOKEN_TTL_SECONDS=0, as the specification says)', async () => {
      const plain = await buildTestApp(dialect);
      try {
        const account = await register(plain.app);
        const res = await call(plain.app, 'GET', '/api/user/tokens', { token: account.token });
        expect(res.status).toBe(200);
        expect(res.body.data.data.map((i: { expires_at: string | null }) => i.expires_at)).toEqual([null]);
      } finally {
        await plain.close();
      }
    });

    it('GET /api/user/tokens lists the live tokens with expires_at 30 days out and marks the current one', async () => {
      const account = await register(t.app);
      const second = (await login(account.user.email, account.password)).body.data.access_token as string;
      const third = (await login(account.user.email, account.password)).body.data.access_token as string;
      await call(t.app, 'POST', '/api/auth/logout', { token: third });
      const res = await call(t.app, 'GET', '/api/user/tokens', { token: account.token });
      expect(res.status).toBe(200);
      const items = res.body.data.data as {
        id: number;
        current: boolean;
        expires_at: string;
        created_at: string;
        last_used_at: string | null;
      }[];
      expect(res.body.data.total).toBe(2);
      expect(items.map((i) => i.id)).toEqual([
        Number(second.split('|')[0]),
        Number(account.token.split('|')[0]),
      ]);
      expect(items.map((i) => i.current)).toEqual([false, true]);
      for (const item of items) {
        const ttl = Date.parse(item.expires_at) - Date.parse(item.created_at);
        expect(ttl).toBe(2_592_000_000);
      }
      expect(items[1]?.last_used_at).not.toBeNull();
      expect(items[0]?.last_used_at).toBeNull();
      expect(JSON.stringify(res.body)).not.toContain(account.token.split('|')[1]);
    });

    it('writes last_used_at at most once a minute per token', async () => {
      const account = await register(t.app);
      const id = Number(account.token.split('|')[0]);
      const used = async () =>
        (
          await t.db.kysely
            .selectFrom('api_tokens')
            .select('last_used_at')
            .where('id', '=', id)
            .executeTakeFirstOrThrow()
        ).last_used_at;
      await call(t.app, 'GET', '/api/user', { token: account.token });
      const first = await used();
      expect(first).not.toBeNull();
      await new Promise((r) => setTimeout(r, 20));
      await call(t.app, 'GET', '/api/user', { token: account.token });
      expect(await used()).toBe(first);
      // A minute later (the clock moved; the process still keeps the token's owner), one write again.
      vi.useFakeTimers({ toFake: ['Date'] });
      try {
        vi.setSystemTime(Date.now() + 61_000);
        await call(t.app, 'GET', '/api/user', { token: account.token });
        expect(Date.parse((await used()) ?? '')).toBeGreaterThan(Date.parse(first ?? '') + 60_000);
      } finally {
        vi.useRealTimers();
      }
    });

    it("DELETE /api/user/tokens/{id} revokes one of the caller's tokens; another user's is 404", async () => {
      const account = await register(t.app);
      const second = (await login(account.user.email, account.password)).body.data.access_token as string;
      const member = await addMember(t.app, account, 'volunteer');
      const stranger = await register(t.app);
      const memberTokenId = member.token.split('|')[0];
      for (const token of [account.token, stranger.token]) {
        expectError(
          await call(t.app, 'DELETE', `/api/user/tokens/${memberTokenId}`, { token }),
          404,
          'not_found',
        );
      }
      expect((await call(t.app, 'GET', '/api/user', { token: member.token })).status).toBe(200);
      const secondId = second.split('|')[0];
      const res = await call(t.app, 'DELETE', `/api/user/tokens/${secondId}`, { token: account.token });
      expect(res.status).toBe(200);
      expectError(await call(t.app, 'GET', '/api/user', { token: second }), 401, 'unauthorized');
      expect((await call(t.app, 'GET', '/api/user', { token: account.token })).status).toBe(200);
      expectError(
        await call(t.app, 'DELETE', `/api/user/tokens/${secondId}`, { token: account.token }),
        404,
        'not_found',
      );
      // A volunteer manages their own tokens.
      expect(
        (await call(t.app, 'GET', '/api/user/tokens', { token: member.token })).body.data.data,
      ).toHaveLength(1);
    });
  });
}

describe('token lifetime and registration settings', () => {
  it('TOKEN_TTL_SECONDS=0 issues tokens without expiry', async () => {
    const t = await buildTestApp('sqlite', { TOKEN_TTL_SECONDS: '0' });
    try {
      const account = await register(t.app);
      const res = await call(t.app, 'GET', '/api/user/tokens', { token: account.token });
      expect(res.body.data.data[0].expires_at).toBeNull();
    } finally {
      await t.close();
    }
  });

  it('TOKEN_TTL_SECONDS past 10 years is refused at start (it would make sign-in fail on an impossible date)', async () => {
    await expect(buildTestApp('sqlite', { TOKEN_TTL_SECONDS: '900000000000000' })).rejects.toThrow(
      /TOKEN_TTL_SECONDS must be between 0 and 315360000/,
    );
    const t = await buildTestApp('sqlite', { TOKEN_TTL_SECONDS: '315360000' });
    try {
      const account = await register(t.app);
      const res = await call(t.app, 'GET', '/api/user/tokens', { token: account.token });
      expect(new Date(res.body.data.data[0].expires_at).getUTCFullYear()).toBeGreaterThanOrEqual(2035);
    } finally {
      await t.close();
    }
  });

  it('REGISTRATION=closed answers register with 403 saying sign-up is closed', async () => {
    const t = await buildTestApp('sqlite', { REGISTRATION: 'closed' });
    try {
      const res = await call(t.app, 'POST', '/api/auth/register', {
        body: { name: 'New Office', email: uniqueEmail(), password: 'a fine long phrase' },
      });
      expectError(res, 403, 'forbidden');
      expect(res.body.message).toMatch(/sign-up is closed/i);
      expect(await t.db.kysely.selectFrom('users').select('id').execute()).toHaveLength(0);
    } finally {
      await t.close();
    }
    await expect(buildTestApp('sqlite', { REGISTRATION: 'maybe' })).rejects.toThrow(/REGISTRATION/);
  });
});
