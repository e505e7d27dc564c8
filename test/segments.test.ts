import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addMember,
  buildTestApp,
  call,
  dialects,
  expectError,
  register,
  type Account,
  type TestApp,
} from './helpers.ts';

for (const dialect of dialects) {
  describe(`segments (${dialect})`, () => {
    let t: TestApp;
    let owner: Account;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
      owner = await register(t.app);
      const voters = [
        { name: 'Asha Patel', phone: '+919900000001', constituency: 'Surat', ward: '4' },
        { name: 'Bharat Patel', phone: '+919900000002', constituency: 'SURAT', ward: '5' },
        { name: 'Chetan Shah', phone: '+919900000003', constituency: 'Surat', ward: '4' },
        { name: 'Dina Patel', phone: '+919900000004', constituency: 'Vadodara', ward: '4' },
      ];
      for (const body of voters) await call(t.app, 'POST', '/api/voters', { token: owner.token, body });
    });
    afterAll(() => t.close());

    it('saves a named filter and counts its voters when read', async () => {
      const res = await call(t.app, 'POST', '/api/segments', {
        token: owner.token,
        body: { name: 'Surat Patels', filters: { constituency: 'surat', search: 'patel' } },
      });
      expect(res.status).toBe(201);
      expect(res.body.data).toMatchObject({
        name: 'Surat Patels',
        filters: { constituency: 'surat', search: 'patel' },
        voter_count: 2,
      });
      const id = res.body.data.id as number;
      await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Esha Patel', phone: '+919900000005', constituency: 'Surat' },
      });
      const one = await call(t.app, 'GET', `/api/segments/${id}`, { token: owner.token });
      expect(one.body.data.voter_count).toBe(3);
      const ward = await call(t.app, 'POST', '/api/segments', {
        token: owner.token,
        body: { name: 'Ward 4', filters: { ward: '4' } },
      });
      expect(ward.body.data.voter_count).toBe(3);
      const all = await call(t.app, 'POST', '/api/segments', {
        token: owner.token,
        body: { name: 'Everyone' },
      });
      expect(all.body.data).toMatchObject({ filters: {}, voter_count: 5 });
    });

    it('lists, reads and deletes', async () => {
      const ws = await register(t.app);
      for (const name of ['One', 'Two', 'Three'])
        await call(t.app, 'POST', '/api/segments', { token: ws.token, body: { name, filters: {} } });
      const list = await call(t.app, 'GET', '/api/segments?per_page=2', { token: ws.token });
      expect(list.body.data).toMatchObject({ total: 3, per_page: 2, last_page: 2, current_page: 1 });
      expect(list.body.data.data.map((s: { name: string }) => s.name)).toEqual(['One', 'Two']);
      const id = list.body.data.data[0].id;
      expect((await call(t.app, 'DELETE', `/api/segments/${id}`, { token: ws.token })).status).toBe(200);
      expectError(await call(t.app, 'GET', `/api/segments/${id}`, { token: ws.token }), 404, 'not_found');
      expectError(await call(t.app, 'DELETE', `/api/segments/${id}`, { token: ws.token }), 404, 'not_found');
    });

    it('PATCH renames and replaces the filters; another workspace and volunteers cannot', async () => {
      const made = await call(t.app, 'POST', '/api/segments', {
        token: owner.token,
        body: { name: 'Ward 4', filters: { ward: '4' } },
      });
      const id = made.body.data.id as number;
      const renamed = await call(t.app, 'PATCH', `/api/segments/${id}`, {
        token: owner.token,
        body: { name: '  Ward four ' },
      });
      expect(renamed.status).toBe(200);
      expect(renamed.body.data).toMatchObject({ id, name: 'Ward four', filters: { ward: '4' } });
      const refiltered = await call(t.app, 'PATCH', `/api/segments/${id}`, {
        token: owner.token,
        body: { filters: { constituency: 'vadodara' } },
      });
      expect(refiltered.body.data).toMatchObject({
        name: 'Ward four',
        filters: { constituency: 'vadodara' },
        voter_count: 1,
      });
      const read = await call(t.app, 'GET', `/api/segments/${id}`, { token: owner.token });
      expect(read.body.data).toMatchObject({ name: 'Ward four', filters: { constituency: 'vadodara' } });
      for (const body of [{}, { name: ' ' }, { filters: { party: 'x' } }, { colour: 'red' }]) {
        expectError(
          await call(t.app, 'PATCH', `/api/segments/${id}`, { token: owner.token, body }),
          422,
          'validation_error',
        );
      }
      const stranger = await register(t.app);
      expectError(
        await call(t.app, 'PATCH', `/api/segments/${id}`, { token: stranger.token, body: { name: 'Mine' } }),
        404,
        'not_found',
      );
      const volunteer = await addMember(t.app, owner, 'volunteer');
      expectError(
        await call(t.app, 'PATCH', `/api/segments/${id}`, { token: volunteer.token, body: { name: 'V' } }),
        403,
        'forbidden',
      );
      expect((await call(t.app, 'GET', `/api/segments/${id}`, { token: owner.token })).body.data.name).toBe(
        'Ward four',
      );
    });

    it('refuses unknown filter keys and bad fields', async () => {
      const res = await call(t.app, 'POST', '/api/segments', {
        token: owner.token,
        body: { name: 'X', filters: { party: 'any', ward: 4 } },
      });
      expectError(res, 422, 'validation_error');
      expect(res.body.details).toEqual({
        'filters.party': ['is not an allowed field.'],
        'filters.ward': ['must be a string.'],
      });
      expectError(
        await call(t.app, 'POST', '/api/segments', { token: owner.token, body: { filters: {} } }),
        422,
        'validation_error',
      );
      expectError(
        await call(t.app, 'POST', '/api/segments', { token: owner.token, body: { name: ' ' } }),
        422,
        'validation_error',
      );
      expectError(
        await call(t.app, 'POST', '/api/segments', {
          token: owner.token,
          body: { name: 'X', filters: 'ward=4' },
        }),
        422,
        'validation_error',
      );
    });

    it("another workspace's segment is 404 and never listed; volunteers may not manage segments", async () => {
      const mine = await call(t.app, 'POST', '/api/segments', {
        token: owner.token,
        body: { name: 'Private', filters: {} },
      });
      const stranger = await register(t.app);
      expectError(
        await call(t.app, 'GET', `/api/segments/${mine.body.data.id}`, { token: stranger.token }),
        404,
        'not_found',
      );
      expectError(
        await call(t.app, 'DELETE', `/api/segments/${mine.body.data.id}`, { token: stranger.token }),
        404,
        'not_found',
      );
      expect((await call(t.app, 'GET', '/api/segments', { token: stranger.token })).body.data.total).toBe(0);
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const manager = await addMember(t.app, owner, 'manager');
      expectError(await call(t.app, 'GET', '/api/segments', { token: volunteer.token }), 403, 'forbidden');
      expectError(
        await call(t.app, 'POST', '/api/segments', { token: volunteer.token, body: { name: 'V' } }),
        403,
        'forbidden',
      );
      expect(
        (await call(t.app, 'POST', '/api/segments', { token: manager.token, body: { name: 'M' } })).status,
      ).toBe(201);
    });
  });
}
