import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  addMember,
  buildTestApp,
  buildTwoApps,
  call,
  dialects,
  expectError,
  register,
  type TestApp,
  uniqueEmail,
  uniquePhone,
  redisUrl,
} from './helpers.ts';

for (const dialect of dialects) {
  describe(`team management (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
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

    it('user items carry active and created_at; GET /api/users/{id} reads one', async () => {
      const owner = await register(t.app);
      const member = await addMember(t.app, owner, 'volunteer');
      const res = await call(t.app, 'GET', `/api/users/${member.user.id}`, { token: owner.token });
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ id: member.user.id, role: 'volunteer', active: true });
      expect(res.body.data.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
      const me = await call(t.app, 'GET', '/api/user', { token: owner.token });
      expect(me.body.data.user).toMatchObject({ active: true, role: 'politician' });
      expectError(await call(t.app, 'GET', '/api/users/99999999', { token: owner.token }), 404, 'not_found');
    });

    it("another workspace's user is 404 to read, change or deactivate", async () => {
      const owner = await register(t.app);
      const other = await register(t.app);
      const theirs = await addMember(t.app, other, 'manager');
      const url = `/api/users/${theirs.user.id}`;
      expectError(await call(t.app, 'GET', url, { token: owner.token }), 404, 'not_found');
      expectError(
        await call(t.app, 'PATCH', url, { token: owner.token, body: { role: 'volunteer' } }),
        404,
        'not_found',
      );
      expectError(await call(t.app, 'DELETE', url, { token: owner.token }), 404, 'not_found');
      expect((await call(t.app, 'GET', '/api/user', { token: theirs.token })).body.data.user.role).toBe(
        'manager',
      );
    });

    it('only politicians read or change members', async () => {
      const owner = await register(t.app);
      const manager = await addMember(t.app, owner, 'manager');
      const volunteer = await addMember(t.app, owner, 'volunteer');
      for (const member of [manager, volunteer]) {
        const url = `/api/users/${volunteer.user.id}`;
        expectError(await call(t.app, 'GET', url, { token: member.token }), 403, 'forbidden');
        expectError(
          await call(t.app, 'PATCH', url, { token: member.token, body: { name: 'X' } }),
          403,
          'forbidden',
        );
        expectError(await call(t.app, 'DELETE', url, { token: member.token }), 403, 'forbidden');
      }
      expectError(await call(t.app, 'GET', `/api/users/${volunteer.user.id}`), 401, 'unauthorized');
    });

    it('PATCH renames and changes the role; the new role applies on the next request', async () => {
      const owner = await register(t.app);
      const member = await addMember(t.app, owner, 'volunteer');
      expectError(await call(t.app, 'GET', '/api/segments', { token: member.token }), 403, 'forbidden');
      const res = await call(t.app, 'PATCH', `/api/users/${member.user.id}`, {
        token: owner.token,
        body: { name: '  Priya   Nair ', role: 'manager' },
      });
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ name: 'Priya Nair', role: 'manager', active: true });
      expect((await call(t.app, 'GET', '/api/segments', { token: member.token })).status).toBe(200);
      // Promoted to politician: manages the team at once.
      await call(t.app, 'PATCH', `/api/users/${member.user.id}`, {
        token: owner.token,
        body: { role: 'politician' },
      });
      expect((await call(t.app, 'GET', '/api/users', { token: member.token })).status).toBe(200);
    });

    it('PATCH validates its body', async () => {
      const owner = await register(t.app);
      const member = await addMember(t.app, owner, 'volunteer');
      const url = `/api/users/${member.user.id}`;
      for (const body of [
        { role: 'admin' },
        { active: 'no' },
        { name: '' },
        { email: 'x@y.z' },
        { name: '   ' },
      ]) {
        const res = await call(t.app, 'PATCH', url, { token: owner.token, body });
        expectError(res, 422, 'validation_error');
        expect(Object.keys(res.body.details)).toEqual([Object.keys(body)[0]]);
      }
      // A role outside the list names the list once, as an enum does.
      const role = await call(t.app, 'PATCH', url, { token: owner.token, body: { role: 'admin' } });
      expect(role.body.details).toEqual({ role: ['must be one of: politician, manager, volunteer.'] });
      const added = await call(t.app, 'POST', '/api/users', {
        token: owner.token,
        body: { name: 'Q', email: uniqueEmail(), password: 'a fine long phrase', role: 'admin' },
      });
      expect(added.body.details).toEqual({ role: ['must be one of: politician, manager, volunteer.'] });
      expectError(
        await call(t.app, 'PATCH', '/api/users/abc', { token: owner.token, body: {} }),
        422,
        'validation_error',
      );
    });

    it('deactivation revokes every token at once; login, verify-otp and old tokens answer as wrong credentials', async () => {
      const owner = await register(t.app);
      const phone = uniquePhone();
      const email = uniqueEmail('gone');
      const password = 'leaving volunteer 1';
      await call(t.app, 'POST', '/api/users', {
        token: owner.token,
        body: { name: 'Leaving', email, password, phone, role: 'volunteer' },
      });
      const login1 = await call(t.app, 'POST', '/api/auth/login', { body: { email, password } });
      const login2 = await call(t.app, 'POST', '/api/auth/login', { body: { email, password } });
      const id = login1.body.data.user.id as number;
      // A code sent before the deactivation must not sign them in after it.
      await call(t.app, 'POST', '/api/auth/send-otp', { body: { phone } });
      const code = await lastCode(phone);

      const res = await call(t.app, 'DELETE', `/api/users/${id}`, { token: owner.token });
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ id, active: false });

      const wrong = await call(t.app, 'POST', '/api/auth/login', {
        body: { email, password: 'not the password' },
      });
      const refused = await call(t.app, 'POST', '/api/auth/login', { body: { email, password } });
      expectError(refused, 401, 'unauthorized');
      expect(refused.body.message).toBe(wrong.body.message);
      for (const login of [login1, login2]) {
        const old = await call(t.app, 'GET', '/api/user', { token: login.body.data.access_token });
        expectError(old, 401, 'unauthorized');
      }
      const rows = await t.db.kysely
        .selectFrom('api_tokens')
        .select('revoked_at')
        .where('user_id', '=', id)
        .execute();
      expect(rows.length).toBe(2);
      expect(rows.every((r) => r.revoked_at !== null)).toBe(true);
      const otp = await call(t.app, 'POST', '/api/auth/verify-otp', { body: { phone, otp: code } });
      expectError(otp, 401, 'unauthorized');

      // Listed as inactive; the active filter tells them apart.
      const inactive = await call(t.app, 'GET', '/api/users?active=false', { token: owner.token });
      expect(inactive.body.data.data.map((u: { id: number }) => u.id)).toEqual([id]);
      const active = await call(t.app, 'GET', '/api/users?active=true', { token: owner.token });
      expect(active.body.data.data.map((u: { id: number }) => u.id)).toEqual([owner.user.id]);
      expect((await call(t.app, 'GET', '/api/users', { token: owner.token })).body.data.total).toBe(2);
      expectError(
        await call(t.app, 'GET', '/api/users?active=maybe', { token: owner.token }),
        422,
        'validation_error',
      );

      // Reactivated: signs in again, but no old token comes back.
      const back = await call(t.app, 'PATCH', `/api/users/${id}`, {
        token: owner.token,
        body: { active: true },
      });
      expect(back.body.data.active).toBe(true);
      expect((await call(t.app, 'POST', '/api/auth/login', { body: { email, password } })).status).toBe(200);
      expectError(
        await call(t.app, 'GET', '/api/user', { token: login1.body.data.access_token }),
        401,
        'unauthorized',
      );
    });

    it('refuses to leave the workspace without an active politician (409)', async () => {
      const owner = await register(t.app);
      const self = `/api/users/${owner.user.id}`;
      expectError(await call(t.app, 'DELETE', self, { token: owner.token }), 409, 'conflict');
      expectError(
        await call(t.app, 'PATCH', self, { token: owner.token, body: { role: 'manager' } }),
        409,
        'conflict',
      );
      expectError(
        await call(t.app, 'PATCH', self, { token: owner.token, body: { active: false } }),
        409,
        'conflict',
      );
      expect((await call(t.app, 'GET', self, { token: owner.token })).body.data).toMatchObject({
        role: 'politician',
        active: true,
      });
      // With a second politician, either may step down, but not both.
      const second = await addMember(t.app, owner, 'manager');
      await call(t.app, 'PATCH', `/api/users/${second.user.id}`, {
        token: owner.token,
        body: { role: 'politician' },
      });
      const down = await call(t.app, 'PATCH', self, { token: owner.token, body: { role: 'volunteer' } });
      expect(down.status).toBe(200);
      expectError(
        await call(t.app, 'DELETE', `/api/users/${second.user.id}`, { token: second.token }),
        409,
        'conflict',
      );
      // A deactivated politician does not count.
      await call(t.app, 'PATCH', self, { token: second.token, body: { role: 'politician', active: false } });
      expectError(
        await call(t.app, 'PATCH', `/api/users/${second.user.id}`, {
          token: second.token,
          body: { role: 'manager' },
        }),
        409,
        'conflict',
      );
    });

    it('two politicians demoting each other at once leave one politician', async () => {
      for (let round = 0; round < 3; round += 1) {
        const owner = await register(t.app);
        const second = await addMember(t.app, owner, 'manager');
        await call(t.app, 'PATCH', `/api/users/${second.user.id}`, {
          token: owner.token,
          body: { role: 'politician' },
        });
        const [a, b] = await Promise.all([
          call(t.app, 'PATCH', `/api/users/${second.user.id}`, {
            token: owner.token,
            body: { role: 'manager' },
          }),
          call(t.app, 'DELETE', `/api/users/${owner.user.id}`, { token: second.token }),
        ]);
        expect([a.status, b.status].sort()).toEqual([200, 409]);
        const politicians = await t.db.kysely
          .selectFrom('users')
          .select('id')
          .where('workspace_id', '=', owner.user.workspace_id)
          .where('role', '=', 'politician')
          .where('deactivated_at', 'is', null)
          .execute();
        expect(politicians).toHaveLength(1);
      }
    });
  });
}

for (const dialect of dialects) {
  describe(`team changes across two API processes (${dialect})`, () => {
    it('a deactivation or role change made through one process applies at once in the other', async () => {
      const [a, b, close] = await buildTwoApps(dialect, redisUrl ? { REDIS_URL: redisUrl } : {});
      try {
        const owner = await register(a.app);
        const manager = await addMember(a.app, owner, 'manager');
        const volunteer = await addMember(a.app, owner, 'volunteer');
        expect((await call(b.app, 'GET', '/api/segments', { token: manager.token })).status).toBe(200);
        expect((await call(b.app, 'GET', '/api/voters', { token: volunteer.token })).status).toBe(200);
        await call(a.app, 'PATCH', `/api/users/${manager.user.id}`, {
          token: owner.token,
          body: { role: 'volunteer' },
        });
        await call(a.app, 'DELETE', `/api/users/${volunteer.user.id}`, { token: owner.token });
        // On SQLite the other connection's commit is seen at the next request; with Redis the change is
        // published, and it reaches the other process within a second (issue 25's bound).
        const seen = async (path: string, token: string, status: number) => {
          const deadline = Date.now() + (redisUrl && dialect === 'postgres' ? 1000 : 0);
          for (;;) {
            const res = await call(b.app, 'GET', path, { token });
            if (res.status === status || Date.now() > deadline) return res;
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
        };
        expectError(await seen('/api/segments', manager.token, 403), 403, 'forbidden');
        expectError(await seen('/api/voters', volunteer.token, 401), 401, 'unauthorized');
      } finally {
        await close();
      }
    });
  });
}
