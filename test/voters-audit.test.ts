import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  buildTestApp,
  call,
  dialects,
  exportVoters,
  multipartBody,
  register,
  uniquePhone,
  type Account,
  type TestApp,
} from './helpers.ts';

async function entries(t: TestApp, owner: Account, action: string) {
  const rows = await t.db.kysely
    .selectFrom('audit_log')
    .selectAll()
    .where('workspace_id', '=', owner.user.workspace_id)
    .where('action', '=', action)
    .orderBy('id')
    .execute();
  return rows.map((r) => ({ ...r, details: r.details ? JSON.parse(r.details) : null }));
}

async function upload(t: TestApp, owner: Account, csv: string, query = '') {
  const { payload, contentType } = multipartBody([{ name: 'file', content: csv, filename: 'ward7.csv' }]);
  const res = await t.app.inject({
    method: 'POST',
    url: `/api/voters/import${query}`,
    headers: { 'content-type': contentType, authorization: `Bearer ${owner.token}` },
    payload,
  });
  expect(res.statusCode).toBe(200);
}

for (const dialect of dialects) {
  describe(`voters audit (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
    });
    afterAll(() => t.close());

    it('records voters.imported with the counts and file name; a dry run records nothing', async () => {
      const owner = await register(t.app);
      const csv = `name,phone\nOne,${uniquePhone()}\nTwo,${uniquePhone()}\n,12\n`; // the last row has no name
      await upload(t, owner, csv, '?dry_run=true');
      expect(await entries(t, owner, 'voters.imported')).toEqual([]);
      await upload(t, owner, csv);
      const [entry, ...more] = await entries(t, owner, 'voters.imported');
      expect(more).toEqual([]);
      expect(entry).toMatchObject({
        actor_id: owner.user.id,
        actor_name: owner.user.name,
        details: { file_name: 'ward7.csv', imported: 2, updated: 0, failed: 1 },
      });
    });

    it('records voters.exported with format, filters and the number of matching voters', async () => {
      const owner = await register(t.app);
      for (const ward of ['7', '7', '8'])
        await call(t.app, 'POST', '/api/voters', {
          token: owner.token,
          body: { name: `Voter ${uniquePhone()}`, phone: uniquePhone(), ward },
        });
      const res = await exportVoters(t.app, owner.token, { format: 'csv', filters: '{"ward":"7"}' });
      expect(res.status).toBe(200);
      const [entry] = await entries(t, owner, 'voters.exported');
      expect(entry).toMatchObject({
        actor_id: owner.user.id,
        details: { format: 'csv', filters: { ward: '7' }, rows: 2 },
      });
      const bad = await call(t.app, 'GET', '/api/voters/export?filters=nope', { token: owner.token });
      expect(bad.status).toBe(422);
      expect(await entries(t, owner, 'voters.exported')).toHaveLength(1);
    });

    it('records voter.deleted with the voter id (and no personal data); a 404 records nothing', async () => {
      const owner = await register(t.app);
      const phone = uniquePhone();
      const created = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Gone Soon', phone },
      });
      const id = created.body.data.id;
      expect((await call(t.app, 'DELETE', `/api/voters/${id}`, { token: owner.token })).status).toBe(200);
      expect((await call(t.app, 'DELETE', `/api/voters/${id}`, { token: owner.token })).status).toBe(404);
      const all = await entries(t, owner, 'voter.deleted');
      expect(all).toHaveLength(1);
      expect(all[0]).toMatchObject({ target_type: 'voter', target_id: String(id), actor_id: owner.user.id });
      expect(JSON.stringify(all[0])).not.toContain(phone);
      expect(JSON.stringify(all[0])).not.toContain('Gone Soon');
    });
  });
}
