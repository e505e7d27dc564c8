import { describe, expect, it } from 'vitest';
import { buildTestApp, call, dialects, uniqueEmail, uniquePhone } from './helpers.ts';

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
  });
}
