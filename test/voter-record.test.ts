import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Account,
  addMember,
  buildTestApp,
  call,
  dialects,
  expectError,
  importCsv,
  parseCsv,
  register,
  type TestApp,
  uniquePhone,
} from './helpers.ts';
import { isolatedDatabase } from './messaging-helpers.ts';
import pino from 'pino';
import { VoterTagging } from '../src/modules/voters/voter-tags.ts';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { until } from './messaging-helpers.ts';

const thisYear = new Date().getUTCFullYear();

/**
 * The voter record an office keeps (the contract's fourth part): the roll's identifiers, the family, age,
 * support, tags and custom fields; the filters on them; households; sensitive data kept from volunteers; bulk
 * tagging.
 */
for (const dialect of dialects) {
  describe(`the voter record (${dialect})`, () => {
    let t: TestApp;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      t = await buildTestApp(dialect, { ...database.env, WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
    });

    const create = (who: Account, body: Record<string, unknown>) =>
      call(t.app, 'POST', '/api/voters', { token: who.token, body: { phone: uniquePhone(), ...body } });
    const read = async (who: Account, id: number) =>
      (await call(t.app, 'GET', `/api/voters/${id}`, { token: who.token })).body.data;
    const names = async (who: Account, query: string) => {
      const res = await call(t.app, 'GET', `/api/voters?per_page=100&${query}`, { token: who.token });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return {
        names: res.body.data.data.map((v: { name: string }) => v.name).sort(),
        total: res.body.data.total,
      };
    };
    const field = (who: Account, body: Record<string, unknown>) =>
      call(t.app, 'POST', '/api/voter-fields', { token: who.token, body });

    it('keeps the roll fields: normalised on the way in, shown on a read, 422 and 409 where the contract says', async () => {
      const owner = await register(t.app);
      const res = await create(owner, {
        name: 'Sita Devi',
        epic_number: ' abc1234567 ',
        part_number: 12,
        serial_number: '345',
        page_number: 7,
        house_number: ' 4 / B ',
        relation_name: 'Ram Prasad',
        relation_type: 'Husband',
        gender: 'F',
        name_local: 'सीता देवी',
        language: 'HI',
        age: 40,
        support_level: 2,
        tags: ['Youth', ' women\u200b  wing '],
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      const voter = await read(owner, res.body.data.id);
      expect(voter).toMatchObject({
        epic_number: 'ABC1234567',
        part_number: 12,
        serial_number: 345,
        page_number: 7,
        house_number: '4 / B',
        relation_name: 'Ram Prasad',
        relation_type: 'husband',
        gender: 'female',
        name_local: 'सीता देवी',
        language: 'hi',
        birth_date: null,
        age: 40,
        support_level: 2,
        tags: ['women wing', 'Youth'],
        fields: {},
        household: [],
      });

      for (const [body, fieldName] of [
        [{ epic_number: 'AB 12' }, 'epic_number'],
        [{ epic_number: 'ABC#1234567' }, 'epic_number'],
        [{ part_number: 10000 }, 'part_number'],
        [{ serial_number: 0 }, 'serial_number'],
        [{ page_number: 1000 }, 'page_number'],
        [{ relation_type: 'cousin' }, 'relation_type'],
        [{ gender: 'x' }, 'gender'],
        [{ language: 'hin' }, 'language'],
        [{ age: 17 }, 'age'],
        [{ birth_date: '2001-02-30' }, 'birth_date'],
        [{ support_level: 6 }, 'support_level'],
        [{ tags: Array.from({ length: 51 }, (_, i) => `t${i}`) }, 'tags'],
        [{ tags: ['x'.repeat(41)] }, 'tags'],
        [{ tags: ['a,b'] }, 'tags'],
      ] as const) {
        const bad = await create(owner, { name: 'Bad Input', ...body });
        expectError(bad, 422, 'validation_error');
        expect(Object.keys(bad.body.details), JSON.stringify(body)).toContain(fieldName);
      }
      expectError(await create(owner, { name: 'Other', epic_number: 'ABC1234567' }), 409, 'conflict');
      expectError(
        await create(owner, { name: 'Other', part_number: 12, serial_number: 345 }),
        409,
        'conflict',
      );
      // Another workspace has its own roll.
      const other = await register(t.app);
      expect((await create(other, { name: 'Other', epic_number: 'ABC1234567' })).status).toBe(201);
    });

    it('takes a birth date or an age, and updates any field; null clears', async () => {
      const owner = await register(t.app);
      const { id } = (await create(owner, { name: 'Born Known', birth_date: `${thisYear - 30}-01-01` })).body
        .data;
      expect(await read(owner, id)).toMatchObject({ birth_date: `${thisYear - 30}-01-01`, age: 30 });
      const up = await call(t.app, 'PUT', `/api/voters/${id}`, {
        token: owner.token,
        body: { age: 55, gender: 'पुरुष', tags: ['Farmer'] },
      });
      expect(up.status, JSON.stringify(up.body)).toBe(200);
      expect(up.body.data).toMatchObject({ age: 55, birth_date: null, gender: 'male', tags: ['Farmer'] });
      const cleared = await call(t.app, 'PUT', `/api/voters/${id}`, {
        token: owner.token,
        body: { age: null, gender: null, tags: [] },
      });
      expect(cleared.body.data).toMatchObject({ age: null, gender: null, tags: [] });
    });

    it('keeps custom fields of five types; a wrong value is 422 on fields.<key>; deleting a field deletes its values', async () => {
      const owner = await register(t.app);
      const manager = await addMember(t.app, owner, 'manager');
      expectError(await field(manager, { key: 'caste', label: 'Caste', type: 'text' }), 403, 'forbidden');
      for (const body of [
        {
          key: 'caste',
          label: 'Caste',
          type: 'choice',
          choices: ['General', 'OBC', 'SC', 'ST'],
          sensitive: true,
        },
        { key: 'family_size', label: 'Family size', type: 'number' },
        { key: 'visited_on', label: 'Visited on', type: 'date' },
        { key: 'has_ration_card', label: 'Ration card', type: 'boolean' },
        { key: 'issue', label: 'Main issue', type: 'text' },
      ])
        expect((await field(owner, body)).status).toBe(201);
      expectError(await field(owner, { key: 'issue', label: 'Again', type: 'text' }), 409, 'conflict');
      expectError(await field(owner, { key: 'Bad Key', label: 'x', type: 'text' }), 422, 'validation_error');
      expectError(
        await field(owner, { key: 'size_min', label: 'x', type: 'number' }),
        422,
        'validation_error',
      );
      expectError(await field(owner, { key: 'pick', label: 'x', type: 'choice' }), 422, 'validation_error');
      const list = await call(t.app, 'GET', '/api/voter-fields', { token: manager.token });
      // In key order: the same on every read and in every export, however quickly they were made.
      expect(list.body.data.map((f: { key: string }) => f.key)).toEqual([
        'caste',
        'family_size',
        'has_ration_card',
        'issue',
        'visited_on',
      ]);
      const res = await create(owner, {
        name: 'Field Voter',
        fields: {
          caste: 'obc',
          family_size: 5,
          visited_on: '2026-11-01',
          has_ration_card: true,
          issue: 'Water',
        },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect((await read(owner, res.body.data.id)).fields).toEqual({
        caste: 'OBC',
        family_size: 5,
        visited_on: '2026-11-01',
        has_ration_card: true,
        issue: 'Water',
      });
      for (const [fields, key] of [
        [{ caste: 'Other' }, 'fields.caste'],
        [{ family_size: 'five' }, 'fields.family_size'],
        [{ visited_on: '01/11/2026' }, 'fields.visited_on'],
        [{ has_ration_card: 'maybe' }, 'fields.has_ration_card'],
        [{ unknown_key: 1 }, 'fields.unknown_key'],
      ] as const) {
        const bad = await create(owner, { name: 'Bad Field', fields });
        expectError(bad, 422, 'validation_error');
        expect(Object.keys(bad.body.details)).toEqual([key]);
      }
      const cleared = await call(t.app, 'PUT', `/api/voters/${res.body.data.id}`, {
        token: owner.token,
        body: { fields: { issue: null } },
      });
      expect(cleared.body.data.fields).not.toHaveProperty('issue');
      expect(cleared.body.data.fields).toHaveProperty('family_size', 5);
      const del = await call(t.app, 'DELETE', '/api/voter-fields/family_size', { token: owner.token });
      expect(del.status).toBe(200);
      expect((await read(owner, res.body.data.id)).fields).not.toHaveProperty('family_size');
      const left = await t.db.kysely
        .selectFrom('voter_field_values')
        .select('field_key')
        .where('field_key', '=', 'family_size')
        .where('voter_id', '=', res.body.data.id)
        .execute();
      expect(left).toEqual([]);
    });

    it('filters by every record field, alone and together, on the list and on segments', async () => {
      const owner = await register(t.app);
      await field(owner, { key: 'family_size', label: 'Family size', type: 'number' });
      await field(owner, { key: 'visited_on', label: 'Visited', type: 'date' });
      await field(owner, { key: 'caste', label: 'Caste', type: 'text', sensitive: true });
      const rows = [
        {
          name: 'A1',
          part_number: 1,
          serial_number: 1,
          page_number: 1,
          house_number: '1',
          gender: 'male',
          age: 25,
          language: 'hi',
          support_level: 1,
          tags: ['Youth', 'Farmer'],
          fields: { family_size: 3, visited_on: '2026-10-01', caste: 'X' },
          epic_number: 'AAA0000001',
        },
        {
          name: 'A2',
          part_number: 1,
          serial_number: 2,
          page_number: 1,
          house_number: '1',
          gender: 'female',
          age: 45,
          language: 'hi',
          support_level: 2,
          tags: ['farmer'],
          fields: { family_size: 6 },
        },
        {
          name: 'A3',
          part_number: 1,
          serial_number: 3,
          page_number: 2,
          house_number: '2',
          gender: 'female',
          age: 70,
          language: 'en',
          support_level: 5,
          tags: ['Women'],
        },
        {
          name: 'B1',
          part_number: 2,
          serial_number: 1,
          page_number: 1,
          house_number: '1',
          gender: 'third_gender',
          age: 33,
          language: 'ta',
          fields: { visited_on: '2026-11-20' },
        },
      ];
      const ids: number[] = [];
      for (const row of rows) {
        const res = await create(owner, row);
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        ids.push(res.body.data.id);
      }
      const cases: Array<[string, string[]]> = [
        ['epic_number=aaa0000001', ['A1']],
        ['search=AAA0000001', ['A1']],
        ['part_number=1', ['A1', 'A2', 'A3']],
        ['part_number=1&serial_from=2&serial_to=3', ['A2', 'A3']],
        ['part_number=1&page_number=1', ['A1', 'A2']],
        ['house_number=1', ['A1', 'A2', 'B1']],
        ['gender=female', ['A2', 'A3']],
        ['age_min=30&age_max=50', ['A2', 'B1']],
        ['age_min=70', ['A3']],
        ['language=hi', ['A1', 'A2']],
        ['support_level=1,2', ['A1', 'A2']],
        ['support_level=5', ['A3']],
        ['tags=FARMER', ['A1', 'A2']],
        ['tags=farmer,youth', ['A1']],
        ['tags_any=youth,women', ['A1', 'A3']],
        ['tags_none=farmer', ['A3', 'B1']],
        ['fields.family_size_min=4', ['A2']],
        ['fields.family_size=3', ['A1']],
        ['fields.visited_on_min=2026-11-01', ['B1']],
        ['fields.caste=X', ['A1']],
        [`household_of=${ids[0]}`, ['A1', 'A2']],
        ['part_number=1&gender=female&tags=women', ['A3']],
        ['search=ZZZ9999999', []],
        ['epic_number=AAA0000001&gender=female', []],
        ['epic_number=AAA0000001&page=2', []],
      ];
      for (const [query, expected] of cases) {
        const found = await names(owner, query);
        expect(found.names, query).toEqual(expected);
        expect(found.total, query).toBe(query.includes('page=2') ? 1 : expected.length);
      }
      for (const [query, key] of [
        ['part_number=0', 'part_number'],
        ['age_min=abc', 'age_min'],
        ['gender=unknown', 'gender'],
        ['support_level=9', 'support_level'],
        ['fields.nope=1', 'fields.nope'],
        ['fields.caste_min=1', 'fields.caste_min'],
        ['fields.family_size=many', 'fields.family_size'],
        ['serial_from=5&serial_to=2', 'serial_to'],
      ] as const) {
        const bad = await call(t.app, 'GET', `/api/voters?${query}`, { token: owner.token });
        expectError(bad, 422, 'validation_error');
        expect(Object.keys(bad.body.details), query).toContain(key);
      }
      // A segment takes the same filters, stores them in one form and counts them.
      const segment = await call(t.app, 'POST', '/api/segments', {
        token: owner.token,
        body: {
          name: 'Farmers of part 1',
          filters: { part_number: '1', tags: 'farmer', 'fields.family_size_min': 2 },
        },
      });
      expect(segment.status, JSON.stringify(segment.body)).toBe(201);
      expect(segment.body.data).toMatchObject({
        filters: { part_number: 1, tags: ['farmer'], 'fields.family_size_min': 2 },
        voter_count: 2,
      });
      expectError(
        await call(t.app, 'POST', '/api/segments', {
          token: owner.token,
          body: { name: 'Bad', filters: { unknown: 1 } },
        }),
        422,
        'validation_error',
      );
    });

    it('a tag or a field value alone, and a dense age range, list the same voters page by page as any filter does', async () => {
      // One tag or one field value alone is counted and paged from its own table (on PostgreSQL counted from
      // voter_value_counts), and on SQLite a filter that matches many voters walks the roll in id order
      // (voters.search.ts): the totals and pages must be those of the rule, through every kind of change.
      const owner = await register(t.app);
      const other = await register(t.app);
      await field(owner, { key: 'ration', label: 'Ration card', type: 'choice', choices: ['APL', 'BPL'] });
      await field(owner, { key: 'members', label: 'Members', type: 'number' });
      await field(other, { key: 'ration', label: 'Ration card', type: 'choice', choices: ['APL', 'BPL'] });
      type Model = { id: number; team: boolean; ration: string; members: number; age: number };
      const model: Model[] = [];
      for (let i = 0; i < 40; i++) {
        const v = {
          team: i % 3 === 0,
          ration: i % 4 === 0 ? 'BPL' : 'APL',
          members: i % 5,
          age: 20 + (i % 30),
        };
        const res = await create(owner, {
          name: `Dense ${i}`,
          age: v.age,
          tags: v.team ? ['Booth Team'] : [],
          fields: { ration: v.ration, members: v.members },
        });
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        model.push({ id: res.body.data.id, ...v });
      }
      // Another workspace's voters with the same tag and value are never counted.
      await create(other, { name: 'Elsewhere', tags: ['Booth Team'], fields: { ration: 'BPL' } });
      const pages = async (query: string) => {
        const ids: number[] = [];
        let total = -1;
        for (let page = 1; page <= 11; page++) {
          const res = await call(t.app, 'GET', `/api/voters?per_page=4&page=${page}&${query}`, {
            token: owner.token,
          });
          expect(res.status, JSON.stringify(res.body)).toBe(200);
          total = res.body.data.total;
          ids.push(...res.body.data.data.map((v: { id: number }) => v.id));
        }
        return { ids, total };
      };
      const cases: Array<[string, (v: Model) => boolean]> = [
        ['tags=booth%20team', (v) => v.team],
        ['tags_any=Booth%20Team', (v) => v.team],
        ['fields.ration=BPL', (v) => v.ration === 'BPL'],
        ['fields.members=2', (v) => v.members === 2],
        ['age_min=30&age_max=39', (v) => v.age >= 30 && v.age <= 39],
        ['tags=booth%20team&fields.ration=BPL', (v) => v.team && v.ration === 'BPL'],
      ];
      const check = async (when: string) => {
        for (const [query, keep] of cases) {
          const want = model.filter(keep).map((v) => v.id);
          const got = await pages(query);
          expect(got.total, `${when}: ${query}`).toBe(want.length);
          expect(got.ids, `${when}: ${query}`).toEqual(want);
        }
      };
      await check('as created');
      // A deleted voter's tags and values go with it.
      const gone = model.pop()!;
      expect((await call(t.app, 'DELETE', `/api/voters/${gone.id}`, { token: owner.token })).status).toBe(
        200,
      );
      // An update that drops the tag and changes the values.
      const changed = model[0]!;
      const patched = await call(t.app, 'PUT', `/api/voters/${changed.id}`, {
        token: owner.token,
        body: { tags: [], age: 33, fields: { ration: 'APL', members: 2 } },
      });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      Object.assign(changed, { team: false, ration: 'APL', members: 2, age: 33 });
      // A bulk tag by ids.
      const tagged = await call(t.app, 'POST', '/api/voters/tags', {
        token: owner.token,
        body: { voter_ids: [model[1]!.id, model[2]!.id], add: ['Booth Team'] },
      });
      expect(tagged.status, JSON.stringify(tagged.body)).toBeLessThan(300);
      model[1]!.team = true;
      model[2]!.team = true;
      await check('after a delete, an update and a bulk tag');
      // A segment counts the same way.
      const seg = await call(t.app, 'POST', '/api/segments', {
        token: owner.token,
        body: { name: 'BPL', filters: { 'fields.ration': 'BPL' } },
      });
      expect(seg.status, JSON.stringify(seg.body)).toBe(201);
      expect(seg.body.data.voter_count).toBe(model.filter((v) => v.ration === 'BPL').length);
      if (dialect === 'postgres') {
        // The deltas folded into one row per value keep the totals; an emptied value leaves no row.
        const { compactVoterValueCounts } = await import('../src/modules/voters/voter-value-counts.ts');
        while (await compactVoterValueCounts(t.db.kysely));
        const rows = await t.db.kysely
          .selectFrom('voter_value_counts')
          .select(['kind', 'key', 'value', 'delta'])
          .where('workspace_id', '=', owner.user.workspace_id)
          .execute();
        expect(new Set(rows.map((r) => `${r.kind}:${r.key}:${r.value}`)).size).toBe(rows.length);
        expect(rows.every((r) => Number(r.delta) > 0)).toBe(true);
        await check('after folding');
      }
      // Deleting the field deletes its values: its filter is then 422, and its counts go.
      expect((await call(t.app, 'DELETE', '/api/voter-fields/ration', { token: owner.token })).status).toBe(
        200,
      );
      if (dialect === 'postgres') {
        const left = await t.db.kysely
          .selectFrom('voter_value_counts')
          .select((eb) => eb.fn.coalesce(eb.fn.sum<number>('delta'), eb.lit(0)).as('n'))
          .where('workspace_id', '=', owner.user.workspace_id)
          .where('kind', '=', 'field')
          .where('key', '=', 'ration')
          .executeTakeFirstOrThrow();
        expect(Number(left.n)).toBe(0);
      }
    });

    it('groups households by part and house number, or by address; the read lists the others', async () => {
      const owner = await register(t.app);
      const head = (await create(owner, { name: 'Head', part_number: 9, house_number: '12A', age: 60 })).body
        .data;
      const wife = (
        await create(owner, {
          name: 'Wife',
          part_number: 9,
          house_number: '12a',
          relation_type: 'wife',
          age: 55,
        })
      ).body.data;
      await create(owner, { name: 'Neighbour', part_number: 9, house_number: '13' });
      const a = (await create(owner, { name: 'Addr One', address: 'Lane 4, Shivpur' })).body.data;
      const b = (await create(owner, { name: 'Addr Two', address: ' lane 4  shivpur ' })).body.data;
      expect((await read(owner, head.id)).household).toEqual([
        { id: wife.id, name: 'Wife', relation_type: 'wife', relation_name: null, age: 55 },
      ]);
      expect((await read(owner, a.id)).household.map((m: { id: number }) => m.id)).toEqual([b.id]);
    });

    it('keeps sensitive data from volunteers: reads, lists, filters and updates', async () => {
      const owner = await register(t.app);
      await field(owner, { key: 'religion', label: 'Religion', type: 'text', sensitive: true });
      await field(owner, { key: 'issue', label: 'Issue', type: 'text' });
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const manager = await addMember(t.app, owner, 'manager');
      const res = await call(t.app, 'POST', '/api/voters', {
        token: volunteer.token,
        body: {
          name: 'Secret Voter',
          phone: uniquePhone(),
          support_level: 1,
          fields: { religion: 'Secret-Value', issue: 'Roads' },
        },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      const id = res.body.data.id;
      const mine = await call(t.app, 'GET', `/api/voters/${id}`, { token: volunteer.token });
      expect(mine.status).toBe(200);
      expect(mine.body.data.fields).toEqual({ issue: 'Roads' });
      expect(mine.body.data).not.toHaveProperty('support_level');
      expect(mine.raw).not.toContain('Secret-Value');
      const list = await call(t.app, 'GET', '/api/voters', { token: volunteer.token });
      expect(list.body.data.data[0]).not.toHaveProperty('support_level');
      expect(list.raw).not.toContain('Secret-Value');
      const up = await call(t.app, 'PUT', `/api/voters/${id}`, {
        token: volunteer.token,
        body: { support_level: 3, fields: { religion: 'Secret-Value' } },
      });
      expect(up.status).toBe(200);
      expect(up.raw).not.toContain('Secret-Value');
      expect(up.body.data).not.toHaveProperty('support_level');
      expectError(
        await call(t.app, 'GET', '/api/voters?support_level=1', { token: volunteer.token }),
        403,
        'forbidden',
      );
      expectError(
        await call(t.app, 'GET', '/api/voters?fields.religion=x', { token: volunteer.token }),
        403,
        'forbidden',
      );
      const seen = await call(t.app, 'GET', `/api/voters/${id}`, { token: manager.token });
      expect(seen.body.data).toMatchObject({
        support_level: 3,
        fields: { religion: 'Secret-Value', issue: 'Roads' },
      });
    });

    it('tags in bulk: by ids at once, by filters as a job that changes each voter once', async () => {
      const owner = await register(t.app);
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const ids: number[] = [];
      for (let i = 0; i < 30; i++)
        ids.push(
          (await create(owner, { name: `Bulk ${i}`, part_number: i < 20 ? 5 : 6, serial_number: i + 1 })).body
            .data.id,
        );
      const tag = (who: Account, body: unknown) =>
        call(t.app, 'POST', '/api/voters/tags', { token: who.token, body });
      expectError(await tag(volunteer, { add: ['x'], voter_ids: [ids[0]] }), 403, 'forbidden');
      expectError(await tag(owner, { add: ['x'] }), 422, 'validation_error');
      expectError(
        await tag(owner, { add: ['x'], voter_ids: [ids[0]], filters: {} }),
        422,
        'validation_error',
      );
      expectError(await tag(owner, { voter_ids: [ids[0]] }), 422, 'validation_error');
      const other = await register(t.app);
      const foreign = (await create(other, { name: 'Foreign' })).body.data.id;
      expectError(await tag(owner, { add: ['x'], voter_ids: [foreign] }), 422, 'validation_error');

      const byIds = await tag(owner, { add: ['Booth Team'], voter_ids: ids.slice(0, 3) });
      expect(byIds.status, JSON.stringify(byIds.body)).toBe(200);
      expect(byIds.body.data).toEqual({ changed: 3 });
      expect((await tag(owner, { add: ['booth team'], voter_ids: ids.slice(0, 4) })).body.data).toEqual({
        changed: 1,
      });

      const job = await tag(owner, {
        add: ['Part Five'],
        remove: ['Booth Team'],
        filters: { part_number: 5 },
      });
      expect(job.status, JSON.stringify(job.body)).toBe(202);
      expect(job.body.data).toMatchObject({ status: 'queued', add: ['Part Five'], remove: ['Booth Team'] });
      await new VoterTagging({ db: t.db.kysely }).runPending({ workspaceIds: [owner.user.workspace_id] });
      const done = await call(t.app, 'GET', `/api/voters/tags/jobs/${job.body.data.id}`, {
        token: owner.token,
      });
      expect(done.body.data).toMatchObject({ status: 'completed', total: 20, changed: 20 });
      expect((await names(owner, 'tags=part five')).total).toBe(20);
      expect((await names(owner, 'tags=booth team')).total).toBe(0);
      // The other workspace's job id is not this one's.
      expectError(
        await call(t.app, 'GET', `/api/voters/tags/jobs/${job.body.data.id}`, { token: other.token }),
        404,
        'not_found',
      );
    });

    it("a workspace that queues many tagging jobs over a large roll does not hold another workspace's job", async () => {
      const tag = (who: Account, body: unknown) =>
        call(t.app, 'POST', '/api/voters/tags', { token: who.token, body });
      const busy = await register(t.app);
      const quiet = await register(t.app);
      const ws = busy.user.workspace_id;
      const stamp = new Date().toISOString();
      const rows = Array.from({ length: 6000 }, (_, i) => ({
        workspace_id: ws,
        name: `Voter ${i}`,
        name_key: `voter ${i}`,
        phone: `+9194${String(i).padStart(8, '0')}`,
        created_at: stamp,
        updated_at: stamp,
      }));
      for (let i = 0; i < rows.length; i += 500)
        await t.db.kysely
          .insertInto('voters')
          .values(rows.slice(i, i + 500))
          .execute();
      const jobs = [];
      for (const label of ['one', 'two', 'three'])
        jobs.push((await tag(busy, { add: [label], filters: {} })).body.data.id);
      await create(quiet, { name: 'Quiet voter' });
      const small = (await tag(quiet, { add: ['small'], filters: {} })).body.data.id;
      // Two chunks in all: the busy workspace's first job gets one, the quiet workspace's job the other.
      let applied = 0;
      await new VoterTagging({ db: t.db.kysely }).runPending({
        workspaceIds: [ws, quiet.user.workspace_id],
        stopping: () => ++applied >= 2,
      });
      const status = async (who: Account, id: number) =>
        (await call(t.app, 'GET', `/api/voters/tags/jobs/${id}`, { token: who.token })).body.data.status;
      expect(await status(quiet, small)).toBe('completed');
      expect(await status(busy, jobs[0])).toBe('running');
      await new VoterTagging({ db: t.db.kysely }).runPending({ workspaceIds: [ws] });
      for (const id of jobs) expect(await status(busy, id)).toBe('completed');
      expect((await names(busy, 'tags=three')).total).toBe(6000);
    });

    it("imports the roll's own columns: EPIC rows without a phone, updates by EPIC, tags and custom fields, ignored columns", async () => {
      const owner = await register(t.app);
      await field(owner, {
        key: 'caste',
        label: 'Caste',
        type: 'choice',
        choices: ['General', 'OBC'],
        sensitive: true,
      });
      await field(owner, { key: 'family_size', label: 'Family', type: 'number' });
      const csv = [
        'Name,EPIC No,Part No,Sl. No.,Page No,House No,Father or Husband Name,Relation Type,Sex,Age,Name (Local),Tags,field:caste,Field: Family Size,Remarks,Phone',
        'Ram Lal,abc0000001,3,1,1,7,Shyam Lal,F,M,44,राम लाल,Youth;farmer,obc,4,x,',
        'Geeta,ABC0000002,3,2,1,7,Ram Lal,W,महिला,40,,,,,,',
        'Mohan,ABC0000003,3,3,2,9,,,T,70,,,,,,+919811111111',
        'Bad Age,ABC0000004,3,4,2,9,,,M,12,,,,,,',
        'Clash,ABC0000005,3,1,2,9,,,M,30,,,,,,',
        'No Id,,3,6,2,9,,,M,30,,,,,,',
      ].join('\n');
      const res = await importCsv(t.app, owner.token, csv);
      expect(res.status, res.raw).toBe(200);
      // Only a repeat is refused (Ram Lal's part and serial number, which a later row holds). A bad age is left out
      // of its row, which is kept (a warning); a row without an EPIC number or a phone is a voter of its own.
      expect(res.body.data).toMatchObject({
        imported: 5,
        updated: 0,
        failed: 1,
        ignored_columns: ['Remarks'],
      });
      const problems = res.body.data.errors.map((e: { row: number; field: string }) => [e.row, e.field]);
      expect(problems).toEqual([[2, 'serial_number']]);
      expect(res.body.data.warnings).toEqual([
        { line: 5, field: 'age', value: '12', reason: expect.stringContaining('left out') },
      ]);
      const list = await call(t.app, 'GET', '/api/voters?part_number=3&per_page=10', { token: owner.token });
      expect(
        list.body.data.data.map((v: { name: string; phone: string | null }) => [v.name, v.phone]),
      ).toEqual([
        ['Geeta', null],
        ['Mohan', '+919811111111'],
        ['Bad Age', null],
        ['Clash', null],
        ['No Id', null],
      ]);
      const clash = list.body.data.data[3];
      expect(clash).toMatchObject({ epic_number: 'ABC0000005', serial_number: 1 });
      const geeta = await read(owner, list.body.data.data[0].id);
      expect(geeta).toMatchObject({
        epic_number: 'ABC0000002',
        gender: 'female',
        relation_type: 'wife',
        relation_name: 'Ram Lal',
        age: 40,
        house_number: '7',
      });
      expect(geeta.household.map((m: { name: string }) => m.name)).toEqual([]);

      // A second file updates by EPIC: the row gives a phone to a voter without one, tags and a field.
      const again = await importCsv(
        t.app,
        owner.token,
        [
          'name,epic_number,phone,tags,field:family_size,support_level',
          'Geeta Devi,abc0000002,9822222222,Women,5,2',
          'Someone,ABC0000003,,, ,',
        ].join('\n'),
      );
      expect(again.status, again.raw).toBe(200);
      expect(again.body.data).toMatchObject({ imported: 0, updated: 2, failed: 0, ignored_columns: [] });
      const updated = await read(owner, geeta.id);
      expect(updated).toMatchObject({
        name: 'Geeta',
        phone: '+919822222222',
        tags: ['Women'],
        fields: { family_size: 5 },
        support_level: 2,
        age: 40,
      });
      // A dry run counts a roll row without a phone as a voter to create.
      const preview = await t.app.inject({
        method: 'POST',
        url: '/api/voters/import?dry_run=true',
        headers: {
          authorization: `Bearer ${owner.token}`,
          'content-type': 'multipart/form-data; boundary=b',
        },
        payload: `--b\r\nContent-Disposition: form-data; name="file"; filename="r.csv"\r\nContent-Type: text/csv\r\n\r\nname,epic_number\nNew One,ZZZ0000001\nOld One,ABC0000003\r\n--b--\r\n`,
      });
      expect(preview.json().data).toMatchObject({ imported: 1, updated: 1, dry_run: true });
      expect(
        (await call(t.app, 'GET', '/api/voters?epic_number=ZZZ0000001', { token: owner.token })).body.data
          .total,
      ).toBe(0);
    });

    it("a file's repeats: one EPIC number twice and one name and phone twice are one voter each, the later line's values kept", async () => {
      const owner = await register(t.app);
      await field(owner, { key: 'caste', label: 'Caste', type: 'choice', choices: ['General', 'OBC'] });
      const res = await importCsv(
        t.app,
        owner.token,
        [
          'name,epic_number,part_number,serial_number,phone,tags,field:caste',
          'Asha,ABC0000011,4,1,,Youth,General',
          'Asha Devi,ABC0000011,4,2,,,OBC',
          'Bina,,,,+919833300001,Farmer,General',
          'Bina,,,,+919833300001,,OBC',
        ].join('\n'),
      );
      expect(res.status, res.raw).toBe(200);
      expect(res.body.data).toMatchObject({ imported: 2, failed: 0, errors: [] });
      const list = await call(t.app, 'GET', '/api/voters?per_page=10', { token: owner.token });
      expect(list.body.data.total).toBe(2);
      const byName = new Map<string, number>(
        list.body.data.data.map((v: { name: string; id: number }) => [v.name, v.id] as const),
      );
      // The EPIC number's later line is the voter (its name and serial); the earlier line's tags went with it.
      expect(await read(owner, byName.get('Asha Devi')!)).toMatchObject({
        epic_number: 'ABC0000011',
        serial_number: 2,
        tags: [],
        fields: { caste: 'OBC' },
      });
      // One name and phone twice: the tags of the last line that gives any, each field's last value.
      expect(await read(owner, byName.get('Bina')!)).toMatchObject({
        phone: '+919833300001',
        tags: ['Farmer'],
        fields: { caste: 'OBC' },
      });
    });

    it('exports every field and imports back unchanged; sensitive data only with include_sensitive, for politicians, audited', async () => {
      const owner = await register(t.app);
      const manager = await addMember(t.app, owner, 'manager');
      const defs = [
        { key: 'caste', label: 'Caste', type: 'choice', choices: ['General', 'OBC'], sensitive: true },
        { key: 'family_size', label: 'Family', type: 'number' },
        { key: 'visited_on', label: 'Visited', type: 'date' },
        { key: 'ration_card', label: 'Ration card', type: 'boolean' },
        { key: 'issue', label: 'Issue', type: 'text' },
      ];
      for (const d of defs) await field(owner, d);
      const people = [
        {
          name: 'Round Trip, "One"',
          email: 'one@example.com',
          constituency: 'Varanasi',
          booth: '12',
          ward: '7',
          address: 'Lane 4',
          epic_number: 'RTP0000001',
          part_number: 4,
          serial_number: 10,
          page_number: 2,
          house_number: '5/A',
          relation_name: 'Father Name',
          relation_type: 'father',
          gender: 'male',
          name_local: 'राउंड ट्रिप',
          language: 'hi',
          birth_date: '1980-05-17',
          support_level: 1,
          tags: ['Youth', 'Booth Team'],
          fields: {
            caste: 'OBC',
            family_size: 4.5,
            visited_on: '2026-11-01',
            ration_card: false,
            issue: '=SUM(A1)',
          },
        },
        {
          name: 'Roll Only',
          epic_number: 'RTP0000002',
          part_number: 4,
          serial_number: 11,
          age: 61,
          gender: 'female',
        },
      ];
      for (const p of people) {
        const res =
          p.name === 'Roll Only'
            ? await importCsv(
                t.app,
                owner.token,
                `name,epic_number,part_number,serial_number,age,gender\nRoll Only,RTP0000002,4,11,61,F\n`,
              )
            : await create(owner, p);
        expect(res.status, res.raw).toBeLessThan(300);
      }
      const download = async (who: Account, query: string) =>
        t.app.inject({
          method: 'GET',
          url: `/api/voters/export${query}`,
          headers: { authorization: `Bearer ${who.token}` },
        });
      const plain = parseCsv((await download(owner, '')).body);
      expect(plain[0]).not.toContain('support_level');
      expect(plain[0]).not.toContain('field:caste');
      expect(plain[0]).toEqual(expect.arrayContaining(['field:family_size', 'tags', 'epic_number', 'age']));
      expect((await download(manager, '?include_sensitive=true')).statusCode).toBe(403);
      const full = await download(owner, '?include_sensitive=true');
      expect(full.statusCode).toBe(200);
      const rows = parseCsv(full.body);
      const header = rows[0]!;
      expect(header).toEqual(expect.arrayContaining(['support_level', 'field:caste']));
      const one = Object.fromEntries(header.map((h, i) => [h, rows[1]![i]]));
      expect(one).toMatchObject({
        epic_number: 'RTP0000001',
        part_number: '4',
        birth_date: '1980-05-17',
        support_level: '1',
        tags: 'Booth Team;Youth',
        'field:caste': 'OBC',
        'field:family_size': '4.5',
        'field:ration_card': 'false',
        'field:issue': "'=SUM(A1)",
      });
      const roll = Object.fromEntries(header.map((h, i) => [h, rows[2]![i]]));
      expect(roll).toMatchObject({ phone: '', age: '61', birth_date: '', gender: 'female' });
      const audit = await call(t.app, 'GET', '/api/audit-log?action=voters.exported_sensitive', {
        token: owner.token,
      });
      expect(audit.body.data.data).toHaveLength(1);

      // Into another workspace with the same fields, and out again: the same file but for ids and times.
      const copy = await register(t.app);
      for (const d of defs) await field(copy, d);
      const imported = await importCsv(t.app, copy.token, full.body);
      expect(imported.body.data, imported.raw).toMatchObject({
        imported: 2,
        failed: 0,
        ignored_columns: ['id', 'created_at', 'updated_at'],
      });
      const again = parseCsv((await download(copy, '?include_sensitive=true')).body);
      const strip = (table: string[][]) =>
        table.map((r) => r.filter((_, i) => !['id', 'created_at', 'updated_at'].includes(header[i]!)));
      expect(again[0]).toEqual(header);
      expect(strip(again)).toEqual(strip(rows));
    });

    it('never puts sensitive data in the event stream or a webhook: a voter who writes in and files a grievance', async () => {
      const owner = await register(t.app);
      await field(owner, { key: 'religion', label: 'Religion', type: 'text', sensitive: true });
      const hook = await call(t.app, 'POST', '/api/webhooks', {
        token: owner.token,
        body: { url: 'http://127.0.0.1:9/hook' },
      });
      expect(hook.status, hook.raw).toBe(201);
      const phone = uniquePhone();
      const voter = await create(owner, {
        name: 'Stream Voter',
        phone,
        support_level: 4,
        fields: { religion: 'Hidden-Religion' },
        tags: ['Quiet'],
      });
      expect(voter.status).toBe(201);
      const inbound = await call(t.app, 'POST', '/api/inbound', {
        token: owner.token,
        body: { channel: 'sms', from: phone, body: 'Please fix the road' },
      });
      expect(inbound.status, inbound.raw).toBe(201);
      const grievance = await call(t.app, 'POST', '/api/grievances', {
        token: owner.token,
        body: { voter_id: voter.body.data.id, title: 'Road', description: 'Potholes' },
      });
      expect(grievance.status, grievance.raw).toBe(201);
      const ws = owner.user.workspace_id;
      const live = await t.db.kysely
        .selectFrom('live_events')
        .select(['type', 'data'])
        .where('workspace_id', '=', ws)
        .execute();
      const sent = await t.db.kysely
        .selectFrom('webhook_events')
        .select(['type', 'payload'])
        .where('workspace_id', '=', ws)
        .execute();
      // The events happened, and none of them carries the record's sensitive values.
      expect(live.map((e) => e.type)).toEqual(
        expect.arrayContaining(['message.received', 'grievance.created']),
      );
      expect(sent.map((e) => e.type)).toEqual(
        expect.arrayContaining(['message.received', 'grievance.created']),
      );
      for (const text of [...live.map((e) => e.data), ...sent.map((e) => e.payload)]) {
        expect(text).not.toContain('Hidden-Religion');
        expect(text).not.toContain('support_level');
      }
    });

    it('a voter from the roll without a phone is skipped by a campaign, and the preview counts them as skipped_no_address', async () => {
      const owner = await register(t.app);
      const imported = await importCsv(
        t.app,
        owner.token,
        `name,epic_number,part_number,phone\nNo Phone,NOP0000001,77,\nHas Phone,NOP0000002,77,${uniquePhone()}\n`,
      );
      expect(imported.body.data, imported.raw).toMatchObject({ imported: 2, failed: 0 });
      const segment = await call(t.app, 'POST', '/api/segments', {
        token: owner.token,
        body: { name: 'Part 77', filters: { part_number: 77 } },
      });
      expect(segment.body.data.voter_count).toBe(2);
      const draft = await call(t.app, 'POST', '/api/campaigns', {
        token: owner.token,
        body: { name: 'Part 77', channel: 'sms', message: 'Vote', segment_id: segment.body.data.id },
      });
      const preview = await call(t.app, 'POST', `/api/campaigns/${draft.body.data.id}/preview`, {
        token: owner.token,
      });
      expect(preview.body.data).toMatchObject({ total_recipients: 1, skipped_no_address: 1, to_send: 1 });
      const sent = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Vote', segment_id: segment.body.data.id },
      });
      expect(sent.status, sent.raw).toBe(202);
      const id = Number(String(sent.body.data.campaign_id).slice(5));
      const worker = new DeliveryWorker({
        db: t.db,
        config: t.config,
        providers: t.providers,
        log: pino({ level: 'silent' }),
      });
      await until(async () => {
        await worker.drain();
        const c = await call(t.app, 'GET', `/api/campaigns/camp_${id}`, { token: owner.token });
        return c.body.data.status === 'completed';
      }, 'the campaign to complete');
      const messages = await t.db.kysely
        .selectFrom('messages')
        .select('to')
        .where('campaign_id', '=', id)
        .execute();
      expect(messages).toHaveLength(1);
    });
  });
}
