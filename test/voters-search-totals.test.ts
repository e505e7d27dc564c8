import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, call, dialects, importCsv, register, type Account, type TestApp } from './helpers.ts';

const MANY = 10_050;

for (const dialect of dialects) {
  describe(`voter search totals (${dialect})`, () => {
    let t: TestApp;
    let owner: Account;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
      owner = await register(t.app);
      const lines = ['name,phone,ward'];
      // MANY voters named Kumar, 20 of them in ward 7 and named Rare too; 30 others named Singh.
      for (let i = 0; i < MANY; i += 1)
        lines.push(`${i < 20 ? 'Rare ' : ''}Kumar ${i},+9197${String(i).padStart(8, '0')},${i < 20 ? 7 : 1}`);
      for (let i = 0; i < 30; i += 1) lines.push(`Singh ${i},+9196${String(i).padStart(8, '0')},2`);
      const res = await importCsv(t.app, owner.token, lines.join('\n'));
      expect(res.body.data).toMatchObject({ imported: MANY + 30, failed: 0 });
    }, 120_000);
    afterAll(() => t.close());

    const list = async (query: string) => {
      const res = await call(t.app, 'GET', `/api/voters?${query}`, { token: owner.token });
      expect(res.status).toBe(200);
      return res.body.data;
    };

    it('a search with more than 10,000 matches says total 10,000, total_exact false, last_page from it', async () => {
      const page = await list('search=kumar&per_page=100');
      expect(page).toMatchObject({ total: 10_000, total_exact: false, last_page: 100, per_page: 100 });
      expect(page.data).toHaveLength(100);
      expect(page.data[0].name).toBe('Rare Kumar 0');
      const last = await list('search=kumar&per_page=100&page=100');
      expect(last.data).toHaveLength(100);
      expect(last).toMatchObject({ total: 10_000, total_exact: false });
      const past = await list('search=kumar&per_page=100&page=101');
      expect(past.data).toEqual([]);
      // A short term (no trigram index) and a phone-digits term are capped the same way.
      expect(await list('search=ku')).toMatchObject({ total: 10_000, total_exact: false });
      expect(await list('search=%2B9197')).toMatchObject({ total: 10_000, total_exact: false });
    });

    it('up to 10,000 matches the count is exact; lists without search are always exact', async () => {
      expect(await list('search=singh')).toMatchObject({ total: 30, total_exact: true, last_page: 2 });
      expect(await list('search=rare%20kumar')).toMatchObject({ total: 20, total_exact: true });
      expect(await list('search=kumar&ward=7')).toMatchObject({ total: 20, total_exact: true });
      expect(await list('search=nobody')).toMatchObject({ total: 0, total_exact: true, data: [] });
      expect(await list('per_page=10')).toMatchObject({ total: MANY + 30, total_exact: true });
      expect(await list('ward=1')).toMatchObject({ total: MANY - 20, total_exact: true });
      const deep = await list('ward=1&per_page=100&page=101');
      expect(deep.data).toHaveLength(30);
      expect(deep.data[29].name).toBe(`Kumar ${MANY - 1}`);
    });
  });
}
