import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rolePermissions } from '../src/http/permissions.ts';
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
  describe(`team members (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
    });
    afterAll(() => t.close());

    it('a politician adds managers and volunteers who can sign in', async () => {
      const owner = await register(t.app);
      const email = uniqueEmail('vol');
      const res = await call(t.app, 'POST', '/api/users', {
        token: owner.token,
        body: {
          name: 'Ravi Kumar',
          email,
          password: 'volunteer pass',
          role: 'volunteer',
          phone: '+91 98765 43210'.replace('43210', String(Date.now()).slice(-5)),
        },
      });
      expect(res.status).toBe(201);
      expect(res.body.data).toMatchObject({
        name: 'Ravi Kumar',
        email,
        role: 'volunteer',
        workspace_id: owner.user.workspace_id,
      });
      expect(res.body.data.phone).toMatch(/^\+9198765\d{5}$/);
      expect(res.body.data).not.toHaveProperty('password_hash');
      const login = await call(t.app, 'POST', '/api/auth/login', {
        body: { email, password: 'volunteer pass' },
      });
      expect(login.status).toBe(200);
      expect(login.body.data.user.role).toBe('volunteer');
      expect(login.body.data.credits).toEqual({
        sms_credits: 100,
        whatsapp_credits: 100,
        email_credits: 100,
      });
    });

    it('lists only its own workspace, in the page envelope', async () => {
      const owner = await register(t.app);
      const other = await register(t.app);
      await addMember(t.app, owner, 'manager');
      await addMember(t.app, owner, 'volunteer');
      await addMember(t.app, other, 'volunteer');
      const res = await call(t.app, 'GET', '/api/users?per_page=2&page=1', { token: owner.token });
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ current_page: 1, per_page: 2, total: 3, last_page: 2 });
      expect(res.body.data.data).toHaveLength(2);
      const page2 = await call(t.app, 'GET', '/api/users?per_page=2&page=2', { token: owner.token });
      const all = [...res.body.data.data, ...page2.body.data.data];
      expect(all.every((u: { workspace_id: number }) => u.workspace_id === owner.user.workspace_id)).toBe(
        true,
      );
      expect(all.map((u: { role: string }) => u.role)).toEqual(['politician', 'manager', 'volunteer']);
      const past = await call(t.app, 'GET', '/api/users?page=9', { token: owner.token });
      expect(past.body.data).toMatchObject({ data: [], total: 3, current_page: 9 });
    });

    it('validates the page query', async () => {
      const owner = await register(t.app);
      for (const q of ['per_page=0', 'per_page=101', 'page=0', 'page=abc']) {
        expectError(
          await call(t.app, 'GET', `/api/users?${q}`, { token: owner.token }),
          422,
          'validation_error',
        );
      }
    });

    it('only politicians manage the team', async () => {
      const owner = await register(t.app);
      const manager = await addMember(t.app, owner, 'manager');
      const volunteer = await addMember(t.app, owner, 'volunteer');
      // Managers list the team (to assign conversations: office-week.test.ts); volunteers do not.
      expectError(await call(t.app, 'GET', '/api/users', { token: volunteer.token }), 403, 'forbidden');
      for (const member of [manager, volunteer]) {
        expectError(
          await call(t.app, 'POST', '/api/users', {
            token: member.token,
            body: { name: 'X', email: uniqueEmail(), password: 'campaign office 2026', role: 'volunteer' },
          }),
          403,
          'forbidden',
        );
        expect((await call(t.app, 'GET', '/api/user', { token: member.token })).status).toBe(200);
      }
      expectError(await call(t.app, 'GET', '/api/users'), 401, 'unauthorized');
    });

    it('refuses a taken email, a politician role and bad fields', async () => {
      const owner = await register(t.app);
      const taken = await call(t.app, 'POST', '/api/users', {
        token: owner.token,
        body: { name: 'X', email: owner.user.email, password: 'campaign office 2026', role: 'manager' },
      });
      expectError(taken, 409, 'conflict');
      // Every role, politician included, as PATCH allows (contract, third part).
      const politician = await call(t.app, 'POST', '/api/users', {
        token: owner.token,
        body: { name: 'X', email: uniqueEmail(), password: 'campaign office 2026', role: 'politician' },
      });
      expect(politician.status).toBe(201);
      expect(politician.body.data.role).toBe('politician');
      const mayor = await call(t.app, 'POST', '/api/users', {
        token: owner.token,
        body: { name: 'X', email: uniqueEmail(), password: 'campaign office 2026', role: 'mayor' },
      });
      expectError(mayor, 422, 'validation_error');
      expect(Object.keys(mayor.body.details)).toEqual(['role']);
      const bad = await call(t.app, 'POST', '/api/users', {
        token: owner.token,
        body: { name: 'X', workspace_id: 1 },
      });
      expectError(bad, 422, 'validation_error');
      expect(bad.body.details.workspace_id).toEqual(['is not an allowed field.']);
    });
  });
}

describe('permission matrix', () => {
  it('matches the contract', () => {
    expect([...rolePermissions.volunteer].sort()).toEqual(
      [
        'authenticated',
        'grievances:read',
        'grievances:write',
        'voters:read',
        'voters:write',
        // Their own conversations (contract, third part).
        'conversations:handle',
        // Their own turfs, and visits and poll-day marks for their voters (fourth part, field work).
        'field:work',
      ].sort(),
    );
    for (const p of ['team:manage', 'webhooks:manage', 'payments:manage', 'channels:manage'] as const) {
      expect(rolePermissions.manager.has(p)).toBe(false);
      expect(rolePermissions.politician.has(p)).toBe(true);
    }
    for (const p of [
      'voters:delete',
      'voters:import',
      'voters:export',
      'messages:send',
      'campaigns:manage',
      'segments:manage',
    ] as const) {
      expect(rolePermissions.manager.has(p)).toBe(true);
      expect(rolePermissions.volunteer.has(p)).toBe(false);
    }
  });

  it('the app refuses to start when a route declares no permission', async () => {
    const t = await buildTestApp('sqlite');
    t.app.get('/api/forgotten', async () => ({ ok: true }));
    await expect(t.app.ready()).rejects.toThrow(/GET \/api\/forgotten declares no valid permission/);
    await t.db.close();
  });
});
