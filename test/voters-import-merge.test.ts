import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  buildTestApp,
  call,
  dialects,
  multipartBody,
  register,
  uniquePhone,
  type Account,
  type TestApp,
} from './helpers.ts';

async function importFile(t: TestApp, owner: Account, csv: string, query = '') {
  const { payload, contentType } = multipartBody([{ name: 'file', content: csv }]);
  const res = await t.app.inject({
    method: 'POST',
    url: `/api/voters/import${query}`,
    headers: { 'content-type': contentType, authorization: `Bearer ${owner.token}` },
    payload,
  });
  return { status: res.statusCode, body: res.json() };
}

async function voterRows(t: TestApp, workspaceId: number) {
  return t.db.kysely
    .selectFrom('voters')
    .select(['id', 'name', 'phone', 'email', 'constituency', 'booth', 'ward', 'address', 'updated_at'])
    .where('workspace_id', '=', workspaceId)
    .orderBy('id')
    .execute();
}

const full = {
  name: 'Sunita Devi',
  email: 'sunita@example.com',
  constituency: 'Varanasi',
  booth: '12',
  ward: '7',
  address: '12 Green Lane',
};

for (const dialect of dialects) {
  describe(`voters import changes only what the file says (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
    });
    afterAll(() => t.close());

    async function withVoter() {
      const owner = await register(t.app);
      const phone = uniquePhone();
      const created = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { ...full, phone },
      });
      expect(created.status).toBe(201);
      return { owner, phone, id: created.body.data.id as number };
    }

    it('a name,phone file over a voter with every field set keeps every field ("0 created, 1 updated")', async () => {
      const { owner, phone, id } = await withVoter();
      const res = await importFile(t, owner, `name,phone\nSunita Devi,${phone}\n`);
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ imported: 0, updated: 1, failed: 0, dry_run: false });
      expect(res.body.message).toContain('0 created, 1 updated');
      const [row] = await voterRows(t, owner.user.workspace_id);
      expect(row).toMatchObject({ id, ...full, phone });
    });

    it('an empty cell keeps the field; a given value changes it; a new voter gets nulls', async () => {
      const { owner, phone, id } = await withVoter();
      const other = uniquePhone();
      const csv = [
        'name,phone,email,constituency,booth,ward,address',
        `SUNITA  devi,${phone},,,,9,`,
        `New Person,${other},,,,,`,
      ].join('\n');
      const res = await importFile(t, owner, csv);
      expect(res.body.data).toMatchObject({ imported: 1, updated: 1, failed: 0 });
      const rows = await voterRows(t, owner.user.workspace_id);
      expect(rows[0]).toMatchObject({ id, ...full, name: 'SUNITA  devi', ward: '9', phone });
      expect(rows[1]).toMatchObject({
        name: 'New Person',
        phone: other,
        email: null,
        constituency: null,
        booth: null,
        ward: null,
        address: null,
      });
    });

    it('within one file, a later row with an empty cell keeps what an earlier row gave (both bulk paths alike)', async () => {
      const owner = await register(t.app);
      const phone = uniquePhone();
      const csv = [
        'name,phone,email,ward',
        `Ravi Kumar,${phone},ravi@example.com,3`,
        `ravi kumar,${phone},,4`,
      ].join('\n');
      const res = await importFile(t, owner, csv);
      expect(res.body.data).toMatchObject({ imported: 1, updated: 1 });
      const rows = await voterRows(t, owner.user.workspace_id);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ name: 'ravi kumar', email: 'ravi@example.com', ward: '4' });
    });

    it('re-importing the same partial file leaves updated_at alone (nothing changed)', async () => {
      const { owner, phone } = await withVoter();
      const [before] = await voterRows(t, owner.user.workspace_id);
      await new Promise((r) => setTimeout(r, 5));
      await importFile(t, owner, `name,phone,ward\nSunita Devi,${phone},7\n`);
      const [after] = await voterRows(t, owner.user.workspace_id);
      expect(after!.updated_at).toEqual(before!.updated_at);
    });
  });

  describe(`voters import dry run (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
    });
    afterAll(() => t.close());

    it('answers the same counts and errors as the real import, with dry_run: true, and writes nothing', async () => {
      const owner = await register(t.app);
      const phone = uniquePhone();
      const created = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { ...full, phone },
      });
      expect(created.status).toBe(201);
      const csv = [
        'name,phone,email,ward',
        `Sunita Devi,${phone},new@example.com,1`,
        `Fresh One,${uniquePhone()},,2`,
        `Fresh Two,${uniquePhone()},bad-email,3`,
        `Fresh Three,12,,`,
        `,${uniquePhone()},,4`,
      ].join('\n');
      const before = await voterRows(t, owner.user.workspace_id);
      const dry = await importFile(t, owner, csv, '?dry_run=true');
      expect(dry.status).toBe(200);
      // Kept: Fresh Two without its email, Fresh Three without its phone (warnings); refused: the row without a name.
      expect(dry.body.data).toMatchObject({ imported: 3, updated: 1, failed: 1, dry_run: true });
      expect(dry.body.data.warnings.map((w: { field: string }) => w.field)).toEqual(['email', 'phone']);
      expect(dry.body.message).toMatch(/dry run/i);
      expect(await voterRows(t, owner.user.workspace_id)).toEqual(before);

      const real = await importFile(t, owner, csv, '?dry_run=false');
      expect(real.body.data).toEqual({ ...dry.body.data, dry_run: false });
      const after = await voterRows(t, owner.user.workspace_id);
      expect(after).toHaveLength(4);
      expect(after[0]).toMatchObject({ email: 'new@example.com', ward: '1', constituency: 'Varanasi' });
    });

    it('a dry run of a refused file is refused the same way; a bad dry_run value is 422', async () => {
      const owner = await register(t.app);
      const res = await importFile(t, owner, 'name,email\nA,a@example.com\n', '?dry_run=true');
      expect(res.status).toBe(422);
      const bad = await importFile(t, owner, 'name,phone\nA,9812345678\n', '?dry_run=maybe');
      expect(bad.status).toBe(422);
      expect(await voterRows(t, owner.user.workspace_id)).toEqual([]);
    });
  });
}
