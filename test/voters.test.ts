import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addMember,
  buildTestApp,
  buildTwoApps,
  call,
  dialects,
  expectError,
  exportVoters,
  importCsv,
  register,
  type Account,
  type TestApp,
} from './helpers.ts';

let seq = 0;
/** A fresh Indian mobile per call, so voters never collide by accident. */
function mobile(): string {
  seq += 1;
  return `+9170${String(Date.now() % 1e5).padStart(5, '0')}${String(seq).padStart(3, '0')}`;
}

async function createVoter(t: TestApp, owner: Account, body: Record<string, unknown> = {}) {
  const res = await call(t.app, 'POST', '/api/voters', {
    token: owner.token,
    body: { name: 'Sunita Devi', phone: mobile(), ...body },
  });
  if (res.status !== 201) throw new Error(`create voter: ${res.status} ${res.raw}`);
  return res.body.data as { id: number; name: string; phone: string; created_at: string };
}

for (const dialect of dialects) {
  describe(`voters (${dialect})`, () => {
    let t: TestApp;
    let owner: Account;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
      owner = await register(t.app);
    });
    afterAll(() => t.close());

    describe('create', () => {
      it('answers 201 with id, name, phone, created_at; phone in E.164; booth and ward kept as strings', async () => {
        const res = await call(t.app, 'POST', '/api/voters', {
          token: owner.token,
          body: {
            name: ' Ramesh  Kumar ',
            phone: '98765 43210',
            email: 'ramesh@example.com',
            constituency: 'Varanasi',
            booth: 12,
            ward: '7',
            address: 'Lane 4',
          },
        });
        expect(res.status).toBe(201);
        expect(res.body.success).toBe(true);
        expect(Object.keys(res.body.data).sort()).toEqual(['created_at', 'id', 'name', 'phone']);
        expect(res.body.data).toMatchObject({ name: 'Ramesh  Kumar', phone: '+919876543210' });
        expect(res.body.data.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
        const one = await call(t.app, 'GET', `/api/voters/${res.body.data.id}`, { token: owner.token });
        expect(one.body.data).toMatchObject({
          booth: '12',
          ward: '7',
          email: 'ramesh@example.com',
          constituency: 'Varanasi',
          address: 'Lane 4',
        });
        expect(Object.keys(one.body.data).sort()).toEqual(
          [
            'address',
            'booth',
            'constituency',
            'created_at',
            'email',
            'id',
            'name',
            'phone',
            'updated_at',
            'ward',
            // the voter record (the contract's fourth part)
            'epic_number',
            'part_number',
            'serial_number',
            'page_number',
            'house_number',
            'relation_name',
            'relation_type',
            'gender',
            'name_local',
            'language',
            'birth_date',
            'age',
            'support_level',
            'tags',
            'fields',
            'household',
            // DPDP consent (the contract's fourth part, "Personal data")
            'consent',
          ].sort(),
        );
      });

      it('is 409 for the same name (any case, spacing) and phone; another name with that phone is fine', async () => {
        const phone = mobile();
        await createVoter(t, owner, { name: 'Anil Sharma', phone });
        expectError(
          await call(t.app, 'POST', '/api/voters', {
            token: owner.token,
            body: { name: ' anil   SHARMA', phone },
          }),
          409,
          'conflict',
        );
        expect(
          (
            await call(t.app, 'POST', '/api/voters', {
              token: owner.token,
              body: { name: 'Anita Sharma', phone },
            })
          ).status,
        ).toBe(201);
      });

      it('validates every field', async () => {
        const res = await call(t.app, 'POST', '/api/voters', {
          token: owner.token,
          body: {
            name: 'x'.repeat(201),
            phone: 12345,
            email: 'nope',
            constituency: 'c'.repeat(121),
            booth: 'b'.repeat(21),
            ward: true,
            address: 'a'.repeat(501),
            extra: 1,
          },
        });
        expectError(res, 422, 'validation_error');
        expect(Object.keys(res.body.details).sort()).toEqual([
          'address',
          'booth',
          'constituency',
          'email',
          'extra',
          'name',
          'phone',
          'ward',
        ]);
        const missing = await call(t.app, 'POST', '/api/voters', { token: owner.token, body: {} });
        expect(missing.body.details).toEqual({ name: ['is required.'], phone: ['is required.'] });
        const badPhone = await call(t.app, 'POST', '/api/voters', {
          token: owner.token,
          body: { name: 'A', phone: '12' },
        });
        expectError(badPhone, 422, 'validation_error');
        expect(Object.keys(badPhone.body.details)).toEqual(['phone']);
        const blank = await call(t.app, 'POST', '/api/voters', {
          token: owner.token,
          body: { name: '  ', phone: mobile() },
        });
        expect(blank.body.details).toEqual({ name: ['must not be empty.'] });
      });

      it('keeps Devanagari byte for byte', async () => {
        const name = 'सुनीता देवी';
        const v = await createVoter(t, owner, { name, constituency: 'वाराणसी', address: 'गली नंबर ४' });
        const one = await call(t.app, 'GET', `/api/voters/${v.id}`, { token: owner.token });
        expect(one.body.data).toMatchObject({ name, constituency: 'वाराणसी', address: 'गली नंबर ४' });
      });
    });

    describe('update and delete', () => {
      it('updates any subset and answers id, the updated fields and updated_at', async () => {
        const v = await createVoter(t, owner);
        const res = await call(t.app, 'PUT', `/api/voters/${v.id}`, {
          token: owner.token,
          body: { name: 'Sunita D.', email: 'sunita@example.com', booth: 44 },
        });
        expect(res.status).toBe(200);
        expect(res.body.data).toEqual({
          id: v.id,
          name: 'Sunita D.',
          email: 'sunita@example.com',
          booth: '44',
          updated_at: expect.any(String),
        });
        const cleared = await call(t.app, 'PUT', `/api/voters/${v.id}`, {
          token: owner.token,
          body: { email: null },
        });
        expect(cleared.body.data).toEqual({ id: v.id, email: null, updated_at: expect.any(String) });
        const one = await call(t.app, 'GET', `/api/voters/${v.id}`, { token: owner.token });
        expect(one.body.data).toMatchObject({ name: 'Sunita D.', email: null, booth: '44', phone: v.phone });
      });

      it('refuses an empty update, bad fields and an identity collision', async () => {
        const a = await createVoter(t, owner, { name: 'Collide One' });
        const b = await createVoter(t, owner, { name: 'Collide Two' });
        expectError(
          await call(t.app, 'PUT', `/api/voters/${a.id}`, { token: owner.token, body: {} }),
          422,
          'validation_error',
        );
        const unknown = await call(t.app, 'PUT', `/api/voters/${a.id}`, {
          token: owner.token,
          body: { name: 'Y', id: 5 },
        });
        expect(unknown.body.details).toEqual({ id: ['is not an allowed field.'] });
        const bad = await call(t.app, 'PUT', `/api/voters/${a.id}`, {
          token: owner.token,
          body: { phone: 'abc', name: '   ' },
        });
        expect(Object.keys(bad.body.details).sort()).toEqual(['name', 'phone']);
        expectError(
          await call(t.app, 'PUT', `/api/voters/${b.id}`, {
            token: owner.token,
            body: { name: 'collide one', phone: a.phone },
          }),
          409,
          'conflict',
        );
        const unchanged = await call(t.app, 'GET', `/api/voters/${b.id}`, { token: owner.token });
        expect(unchanged.body.data.name).toBe('Collide Two');
      });

      it('deletes, then the voter is 404 everywhere', async () => {
        const v = await createVoter(t, owner);
        const res = await call(t.app, 'DELETE', `/api/voters/${v.id}`, { token: owner.token });
        expect(res.status).toBe(200);
        expect(res.body).toEqual({ success: true, message: expect.any(String) });
        expectError(
          await call(t.app, 'GET', `/api/voters/${v.id}`, { token: owner.token }),
          404,
          'not_found',
        );
        expectError(
          await call(t.app, 'DELETE', `/api/voters/${v.id}`, { token: owner.token }),
          404,
          'not_found',
        );
        expectError(
          await call(t.app, 'PUT', `/api/voters/${v.id}`, { token: owner.token, body: { name: 'X' } }),
          404,
          'not_found',
        );
      });

      it('validates the id', async () => {
        expectError(
          await call(t.app, 'GET', '/api/voters/abc', { token: owner.token }),
          422,
          'validation_error',
        );
        expectError(
          await call(t.app, 'GET', '/api/voters/0', { token: owner.token }),
          422,
          'validation_error',
        );
        expectError(
          await call(t.app, 'GET', '/api/voters/99999999999', { token: owner.token }),
          404,
          'not_found',
        );
      });
    });

    describe('list and search', () => {
      let ws: Account;
      beforeAll(async () => {
        ws = await register(t.app);
        const rows = [
          {
            name: 'Priya Verma',
            phone: '+919811100001',
            email: 'priya.verma@example.com',
            constituency: 'Lucknow East',
            booth: '1',
            ward: '10',
          },
          {
            name: 'Rahul Verma',
            phone: '+919811100002',
            email: 'rahul@example.org',
            constituency: 'lucknow east',
            booth: '2',
            ward: '10',
          },
          { name: 'प्रिया शर्मा', phone: '+919822200003', constituency: 'Kanpur', booth: '1', ward: '11' },
          {
            name: 'Mohd Irfan',
            phone: '+919822200004',
            email: 'irfan_50%@example.com',
            constituency: 'Kanpur',
            booth: '3',
            ward: '11',
          },
          { name: 'Kavya Rao', phone: '+14155550123', constituency: 'Abroad', booth: '9', ward: '99' },
        ];
        for (const body of rows)
          expect((await call(t.app, 'POST', '/api/voters', { token: ws.token, body })).status).toBe(201);
      });

      const names = async (query: string) => {
        const res = await call(t.app, 'GET', `/api/voters?${query}`, { token: ws.token });
        expect(res.status).toBe(200);
        return (res.body.data.data as { name: string }[]).map((v) => v.name);
      };

      it('pages in id order with true totals and the list item fields only', async () => {
        const res = await call(t.app, 'GET', '/api/voters?per_page=2&page=2', { token: ws.token });
        expect(res.body.data).toMatchObject({ current_page: 2, per_page: 2, total: 5, last_page: 3 });
        expect(res.body.data.data.map((v: { name: string }) => v.name)).toEqual(['प्रिया शर्मा', 'Mohd Irfan']);
        expect(Object.keys(res.body.data.data[0]).sort()).toEqual(
          [
            'booth',
            'constituency',
            'id',
            'name',
            'phone',
            'ward',
            'epic_number',
            'part_number',
            'serial_number',
            'tags',
            'support_level',
          ].sort(),
        );
        const defaults = await call(t.app, 'GET', '/api/voters', { token: ws.token });
        expect(defaults.body.data).toMatchObject({ current_page: 1, per_page: 15, total: 5, last_page: 1 });
        const past = await call(t.app, 'GET', '/api/voters?page=50', { token: ws.token });
        expect(past.body.data).toMatchObject({ data: [], total: 5, current_page: 50 });
      });

      it('rejects page and per_page out of range', async () => {
        for (const q of [
          'per_page=0',
          'per_page=101',
          'page=0',
          'page=-1',
          'per_page=x',
          `search=${'s'.repeat(101)}`,
        ]) {
          expectError(
            await call(t.app, 'GET', `/api/voters?${q}`, { token: ws.token }),
            422,
            'validation_error',
          );
        }
      });

      it('filters constituency (case-insensitive), booth and ward exactly', async () => {
        expect(await names('constituency=LUCKNOW%20EAST')).toEqual(['Priya Verma', 'Rahul Verma']);
        expect(await names('booth=1')).toEqual(['Priya Verma', 'प्रिया शर्मा']);
        expect(await names('ward=11&booth=3')).toEqual(['Mohd Irfan']);
        expect(await names('constituency=Lucknow')).toEqual([]);
      });

      it('searches name and email substrings case-insensitively, and phone digits', async () => {
        expect(await names('search=verma')).toEqual(['Priya Verma', 'Rahul Verma']);
        expect(await names('search=EXAMPLE.ORG')).toEqual(['Rahul Verma']);
        expect(await names(`search=${encodeURIComponent('प्रिया')}`)).toEqual(['प्रिया शर्मा']);
        expect(await names('search=2220000')).toEqual(['प्रिया शर्मा', 'Mohd Irfan']);
        expect(await names(`search=${encodeURIComponent('+91 98111')}`)).toEqual([
          'Priya Verma',
          'Rahul Verma',
        ]);
        expect(await names('search=4155550123')).toEqual(['Kavya Rao']);
        expect(await names('search=ra')).toEqual(['Rahul Verma', 'Kavya Rao']);
        expect(await names(`search=${encodeURIComponent('50%')}`)).toEqual(['Mohd Irfan']);
        expect(await names(`search=${encodeURIComponent('"quoted" OR name:*')}`)).toEqual([]);
        expect(await names('search=verma&constituency=kanpur')).toEqual([]);
      });

      it('keeps the search index in step with updates and deletes', async () => {
        const v = await call(t.app, 'POST', '/api/voters', {
          token: ws.token,
          body: { name: 'Zubin Mistry', phone: '+919833300005' },
        });
        expect(await names('search=zubin')).toEqual(['Zubin Mistry']);
        await call(t.app, 'PUT', `/api/voters/${v.body.data.id}`, {
          token: ws.token,
          body: { name: 'Xerxes Mistry', email: 'xm@example.net' },
        });
        expect(await names('search=zubin')).toEqual([]);
        expect(await names('search=xerxes')).toEqual(['Xerxes Mistry']);
        expect(await names('search=example.net')).toEqual(['Xerxes Mistry']);
        await call(t.app, 'DELETE', `/api/voters/${v.body.data.id}`, { token: ws.token });
        expect(await names('search=mistry')).toEqual([]);
      });
    });

    describe('totals', () => {
      it('stay exact through creates and deletes, with or without other workspaces in the database', async () => {
        const solo = await buildTestApp(dialect);
        try {
          const only = await register(solo.app);
          const totals = async (app: TestApp['app'], token: string, query: string) =>
            (await call(app, 'GET', `/api/voters?${query}`, { token })).body.data.total as number;
          const ids: number[] = [];
          for (const name of ['Kumar One', 'Kumar Two', 'Other Three']) {
            ids.push((await createVoter(solo, only, { name })).id);
          }
          expect(await totals(solo.app, only.token, '')).toBe(3);
          expect(await totals(solo.app, only.token, 'search=kumar')).toBe(2);
          // A second workspace with matching voters must not leak into the first one's totals.
          const second = await register(solo.app);
          await createVoter(solo, second, { name: 'Kumar Four' });
          expect(await totals(solo.app, only.token, 'search=kumar')).toBe(2);
          expect(await totals(solo.app, second.token, 'search=kumar')).toBe(1);
          await call(solo.app, 'DELETE', `/api/voters/${ids[0]}`, { token: only.token });
          expect(await totals(solo.app, only.token, '')).toBe(2);
          expect(await totals(solo.app, only.token, 'search=kumar')).toBe(1);
          expect(await totals(solo.app, second.token, '')).toBe(1);
          // An update changes what matches.
          const renamed = await call(solo.app, 'PUT', `/api/voters/${ids[2]}`, {
            token: only.token,
            body: { name: 'Kumar Three' },
          });
          expect(renamed.status).toBe(200);
          expect(await totals(solo.app, only.token, 'search=kumar')).toBe(2);
          expect(await totals(solo.app, only.token, 'search=other')).toBe(0);
          const edit = (body: object) =>
            call(solo.app, 'PUT', `/api/voters/${ids[2]}`, { token: only.token, body });
          expect((await edit({ booth: '42' })).status).toBe(200);
          expect(await totals(solo.app, only.token, 'booth=42')).toBe(1);
        } finally {
          await solo.close();
        }
      });
      it('two API processes on one database never answer from what they remembered of an older version', async () => {
        const [a, b, closeBoth] = await buildTwoApps(dialect);
        try {
          const office = await register(a.app);
          const total = async (app: TestApp['app'], query: string) =>
            (await call(app, 'GET', `/api/voters?${query}`, { token: office.token })).body.data
              .total as number;
          const made = await call(b.app, 'POST', '/api/voters', {
            token: office.token,
            body: { name: 'Meera Kumari', phone: '9812300700', booth: '5' },
          });
          expect(made.status).toBe(201);
          for (const query of ['search=kumari', 'booth=5', 'search=meera&booth=5'])
            expect(await total(a.app, query)).toBe(1);
          // Changed through the other process: the first one sees it at once.
          await call(b.app, 'PUT', `/api/voters/${made.body.data.id}`, {
            token: office.token,
            body: { name: 'Meera Devi', booth: '6' },
          });
          for (const query of ['search=kumari', 'booth=5', 'search=meera&booth=5'])
            expect(await total(a.app, query)).toBe(0);
          expect(await total(a.app, 'search=devi')).toBe(1);
          await call(b.app, 'DELETE', `/api/voters/${made.body.data.id}`, { token: office.token });
          expect(await total(a.app, 'search=devi')).toBe(0);
          expect(await total(a.app, '')).toBe(0);
        } finally {
          await closeBoth();
        }
      });

      it('deep pages, read from either end, hold exactly the rows of the id order', async () => {
        const roll = await buildTestApp(dialect);
        try {
          const owner = await register(roll.app);
          const other = await register(roll.app);
          const csv = (prefix: string, from: number) => {
            const lines = ['name,phone,booth'];
            for (let i = from; i < from + 1300; i += 1)
              lines.push(`${prefix} ${i},+9195${String(i).padStart(8, '0')},${i % 3 === 0 ? 2 : 1}`);
            return lines.join('\n');
          };
          // Two imports per workspace, interleaved, so each workspace's ids have gaps.
          for (const [account, prefix, from] of [
            [owner, 'Deep', 0],
            [other, 'Other', 0],
            [owner, 'Deep', 1300],
            [other, 'Other', 1300],
          ] as const) {
            const res = await importCsv(roll.app, account.token, csv(prefix, from));
            expect(res.body.data.imported).toBe(1300);
          }
          // The expected order comes from the export (a different query): 2,600 rows, minus a few deleted.
          const exported = async (filters: object) =>
            (await exportVoters(roll.app, owner.token, { filters })).raw
              .trim()
              .split('\n')
              .slice(1)
              .map((line) => Number(line.split(',')[0]));
          for (const id of (await exported({})).filter((_, i) => i % 97 === 5))
            expect((await call(roll.app, 'DELETE', `/api/voters/${id}`, { token: owner.token })).status).toBe(
              200,
            );
          const checkPages = async () => {
            for (const [query, filters] of [
              ['', {}],
              ['&booth=1', { booth: '1' }],
              ['&search=deep%201', { search: 'deep 1' }],
            ] as const) {
              const all = await exported(filters);
              expect(all.length).toBeGreaterThan(1000);
              for (const perPage of [100, 37]) {
                const lastPage = Math.ceil(all.length / perPage);
                for (const page of [
                  1,
                  2,
                  11,
                  12,
                  Math.floor(lastPage / 2),
                  lastPage - 3,
                  lastPage - 1,
                  lastPage,
                  lastPage + 1,
                ]) {
                  const res = await call(
                    roll.app,
                    'GET',
                    `/api/voters?per_page=${perPage}&page=${page}${query}`,
                    {
                      token: owner.token,
                    },
                  );
                  expect(res.status).toBe(200);
                  expect(res.body.data.total).toBe(all.length);
                  expect(res.body.data.data.map((v: { id: number }) => v.id)).toEqual(
                    all.slice((page - 1) * perPage, page * perPage),
                  );
                }
              }
            }
          };
          await checkPages();
          await checkPages(); // the same version again: now every page starts at a remembered place
          // Another version of the voters: what the first round learned about page starts must not be used.
          for (const id of (await exported({})).filter((_, i) => i % 50 === 7))
            expect((await call(roll.app, 'DELETE', `/api/voters/${id}`, { token: owner.token })).status).toBe(
              200,
            );
          await checkPages();
        } finally {
          await roll.close();
        }
      });
    });

    describe('tenancy and roles', () => {
      it("another workspace's voter is 404 for every verb and absent from its lists and search", async () => {
        const mine = await createVoter(t, owner, { name: 'Tenancy Probe Voter' });
        const stranger = await register(t.app);
        expectError(
          await call(t.app, 'GET', `/api/voters/${mine.id}`, { token: stranger.token }),
          404,
          'not_found',
        );
        expectError(
          await call(t.app, 'PUT', `/api/voters/${mine.id}`, {
            token: stranger.token,
            body: { name: 'Hijack' },
          }),
          404,
          'not_found',
        );
        expectError(
          await call(t.app, 'DELETE', `/api/voters/${mine.id}`, { token: stranger.token }),
          404,
          'not_found',
        );
        const list = await call(t.app, 'GET', '/api/voters?search=probe', { token: stranger.token });
        expect(list.body.data.total).toBe(0);
        expect(
          (await call(t.app, 'GET', `/api/voters/${mine.id}`, { token: owner.token })).body.data.name,
        ).toBe('Tenancy Probe Voter');
        // The same person may be on two campaigns' rolls.
        expect(
          (
            await call(t.app, 'POST', '/api/voters', {
              token: stranger.token,
              body: { name: 'Tenancy Probe Voter', phone: mine.phone },
            })
          ).status,
        ).toBe(201);
      });

      it('volunteers read, create and update but do not delete; no token is 401', async () => {
        const volunteer = await addMember(t.app, owner, 'volunteer');
        const manager = await addMember(t.app, owner, 'manager');
        const v = await createVoter(t, volunteer);
        expect((await call(t.app, 'GET', '/api/voters', { token: volunteer.token })).status).toBe(200);
        expect((await call(t.app, 'GET', `/api/voters/${v.id}`, { token: volunteer.token })).status).toBe(
          200,
        );
        expect(
          (await call(t.app, 'PUT', `/api/voters/${v.id}`, { token: volunteer.token, body: { ward: '3' } }))
            .status,
        ).toBe(200);
        expectError(
          await call(t.app, 'DELETE', `/api/voters/${v.id}`, { token: volunteer.token }),
          403,
          'forbidden',
        );
        expect((await call(t.app, 'DELETE', `/api/voters/${v.id}`, { token: manager.token })).status).toBe(
          200,
        );
        expectError(await call(t.app, 'GET', '/api/voters'), 401, 'unauthorized');
        expectError(
          await call(t.app, 'POST', '/api/voters', { body: { name: 'A', phone: mobile() } }),
          401,
          'unauthorized',
        );
      });
    });
  });
}
