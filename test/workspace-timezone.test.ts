/**
 * A workspace's time zone (the contract's fourth part, "Times"): answers stay UTC, and GET /api/workspace says
 * which zone the console shows times in: the workspace's own (PATCH /api/workspace, politicians), else the
 * deployment's QUIET_HOURS_TZ.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, buildTestApp, call, dialects, expectError, register, type TestApp } from './helpers.ts';
import { isolatedDatabase } from './messaging-helpers.ts';

for (const dialect of dialects) {
  describe(`a workspace's time zone (${dialect})`, () => {
    let t: TestApp;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      t = await buildTestApp(dialect, { ...database.env, QUIET_HOURS_TZ: 'Asia/Kolkata' });
    });
    afterAll(async () => {
      await t?.close();
      await database?.drop();
    });

    it('is the deployment default until a politician sets one; a bad name is 422 and changes nothing', async () => {
      const owner = await register(t.app);
      const read = async () => (await call(t.app, 'GET', '/api/workspace', { token: owner.token })).body.data;
      expect(await read()).toMatchObject({ timezone: 'Asia/Kolkata', timezone_set: false });
      const set = await call(t.app, 'PATCH', '/api/workspace', {
        token: owner.token,
        body: { timezone: 'America/New_York' },
      });
      expect(set.status, set.raw).toBe(200);
      expect(await read()).toMatchObject({ timezone: 'America/New_York', timezone_set: true });
      for (const timezone of ['Mars/Olympus_Mons', 'IST+5:30', '']) {
        const bad = await call(t.app, 'PATCH', '/api/workspace', { token: owner.token, body: { timezone } });
        expectError(bad, 422, 'validation_error');
        expect(Object.keys(bad.body.details)).toEqual(['timezone']);
      }
      expect((await read()).timezone).toBe('America/New_York');
      const manager = await addMember(t.app, owner, 'manager');
      expectError(
        await call(t.app, 'PATCH', '/api/workspace', { token: manager.token, body: { timezone: 'UTC' } }),
        403,
        'forbidden',
      );
      const cleared = await call(t.app, 'PATCH', '/api/workspace', {
        token: owner.token,
        body: { timezone: null, name: 'Varanasi office' },
      });
      expect(cleared.body.data).toMatchObject({
        name: 'Varanasi office',
        timezone: 'Asia/Kolkata',
        timezone_set: false,
      });
      const audit = await call(t.app, 'GET', '/api/audit-log?action=workspace.updated', {
        token: owner.token,
      });
      expect(audit.body.data.total).toBe(2);
    });
  });
}
