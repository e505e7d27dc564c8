import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/jobs/delivery-worker.ts';
import {
  advanceMemo,
  type ListMemo,
  memoStats,
  type VoterValues,
} from '../src/modules/voters/voters.memo.ts';
import {
  filteredVoters,
  pruneVoterChanges,
  type VoterFilters,
  voterMatcher,
} from '../src/modules/voters/voters.repository.ts';
import {
  buildTestApp,
  buildTwoApps,
  call,
  dialects,
  importCsv,
  register,
  type Account,
  type TestApp,
} from './helpers.ts';

const silent = pino({ level: 'silent' });

/** The ids that `filters` match, in id order, from the same filters run in the database. */
async function matchingIds(t: TestApp, workspaceId: number, filters: VoterFilters): Promise<number[]> {
  const rows = await filteredVoters(t.db.kysely, workspaceId, filters)
    .select('voters.id')
    .orderBy('voters.id')
    .execute();
  return rows.map((r) => Number(r.id));
}

/** A small deterministic generator (mulberry32), so a failing sequence of changes can be replayed. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const given = ['Asha', 'Ravi', 'Meera', 'Arjun', 'सुनीता', 'राहुल', 'Élodie', 'Kumar'];
const surnames = ['Kumar', 'Sharma', 'Patel', 'Devi', 'देवी', 'कुमार', 'Mistry', 'KUMARI'];
const constituencies = ['North', 'South', 'Varanasi Cantt'];

const values = (v: Partial<VoterValues>): VoterValues => ({
  name: 'Asha Kumar',
  email: null,
  phone: '+919876500001',
  constituency_key: null,
  booth: null,
  ward: null,
  ...v,
});

describe('advanceMemo', () => {
  const memo: ListMemo = {
    version: 10,
    total: 5,
    anchors: new Map([
      [0, 3],
      [3, 20],
    ]),
    ids: [3, 7, 12, 20, 30],
  };
  const kumar = voterMatcher({ search: 'kumar' });

  it('moves the total, the page starts after the voter and the remembered ids', () => {
    const next = advanceMemo(
      memo,
      12,
      [
        { version: 11, voterId: 15, after: values({}) }, // a create that matches
        { version: 12, voterId: 7, before: values({}), after: values({ name: 'Asha Rao' }) }, // leaves
      ],
      kumar,
      100,
    );
    expect(next).toEqual({
      version: 12,
      total: 5,
      anchors: new Map([
        [0, 3],
        [3, 20],
      ]),
      ids: [3, 12, 15, 20, 30],
    });
    const created = advanceMemo(memo, 11, [{ version: 11, voterId: 4, after: values({}) }], kumar, 100);
    expect(created?.anchors).toEqual(
      new Map([
        [0, 3],
        [4, 20],
      ]),
    );
    // A remembered page start whose own voter leaves is forgotten; more ids than kept drops the list.
    const left = advanceMemo(memo, 11, [{ version: 11, voterId: 20, before: values({}) }], kumar, 3);
    expect(left).toEqual({ version: 11, total: 4, anchors: new Map([[0, 3]]), ids: undefined });
    expect(memo.total).toBe(5); // the memo it started from is unchanged
  });

  it('refuses a gap in the versions, and a change it cannot judge outside the database', () => {
    const one = [{ version: 11, voterId: 15, after: values({}) }];
    expect(advanceMemo(memo, 12, one, kumar, 100)).toBeUndefined();
    expect(
      advanceMemo(memo, 12, [{ version: 12, voterId: 15, after: values({}) }], kumar, 100),
    ).toBeUndefined();
    // A deleted voter's text is not kept: a search cannot tell, an exact filter can.
    const deleted = [{ version: 11, voterId: 7, before: values({ name: null, phone: null, booth: '4' }) }];
    expect(advanceMemo(memo, 11, deleted, kumar, 100)).toBeUndefined();
    expect(advanceMemo(memo, 11, deleted, voterMatcher({ booth: '4' }), 100)?.total).toBe(4);
    const cased = [{ version: 11, voterId: 15, after: values({ name: 'Élodie Kumar' }) }];
    expect(advanceMemo(memo, 11, cased, kumar, 100)).toBeUndefined();
    // The same change is judged when an exact filter already rules the voter out.
    const booth = voterMatcher({ search: 'kumar', booth: '4' });
    expect(advanceMemo(memo, 11, cased, booth, 100)?.total).toBe(5);
  });
});

for (const dialect of dialects) {
  describe(`remembered totals brought forward through changes (${dialect})`, () => {
    let t: TestApp;
    let owner: Account;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
      owner = await register(t.app);
    });
    afterAll(() => t.close());

    const filterSets: VoterFilters[] = [
      {},
      { booth: '2' },
      { constituency: 'NORTH' },
      { ward: '3', booth: '1' },
      { search: 'kumar' },
      { search: 'ar' }, // too short for trigrams: LIKE
      { search: 'देवी' },
      { search: 'élo' }, // cased outside ASCII: always counted in the database
      { search: 'rediff' },
      { search: '98765 1' }, // phone digits
      { search: '12' },
      { search: 'sharma', constituency: 'south' },
    ];
    const query = (filters: VoterFilters) =>
      Object.entries(filters)
        .map(([k, v]) => `&${k}=${encodeURIComponent(v as string)}`)
        .join('');

    /** Every list answer (total and a spread of pages) against the same filters run in the database. */
    async function expectListsTrue() {
      for (const filters of filterSets) {
        const truth = await matchingIds(t, owner.user.workspace_id, filters);
        const lastPage = Math.max(1, Math.ceil(truth.length / 100));
        for (const page of new Set([1, 11, 12, Math.ceil(lastPage / 2), lastPage])) {
          const res = await call(t.app, 'GET', `/api/voters?per_page=100&page=${page}${query(filters)}`, {
            token: owner.token,
          });
          expect(res.status).toBe(200);
          expect({ filters, page, total: res.body.data.total }).toEqual({
            filters,
            page,
            total: truth.length,
          });
          expect(res.body.data.data.map((v: { id: number }) => v.id)).toEqual(
            truth.slice((page - 1) * 100, page * 100),
          );
        }
      }
    }

    it('answer exactly what the database holds after every create, update and delete', async () => {
      const rand = random(dialect === 'sqlite' ? 7 : 11);
      const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)]!;
      const person = () => `${pick(given)} ${pick(surnames)}`;
      const lines = ['name,phone,email,constituency,booth,ward'];
      for (let i = 0; i < 2600; i += 1) {
        const email = rand() < 0.4 ? `v${i}@rediffmail.com` : '';
        lines.push(
          `${person()} ${i},+9198765${String(i).padStart(5, '0')},${email},${pick(constituencies)},${1 + (i % 2)},${1 + (i % 3)}`,
        );
      }
      expect((await importCsv(t.app, owner.token, lines.join('\n'))).body.data.imported).toBe(2600);
      await expectListsTrue();

      const ids = (
        await filteredVoters(t.db.kysely, owner.user.workspace_id, {}).select('voters.id').execute()
      ).map((r) => Number(r.id));
      const { advanced, computed } = memoStats;
      let phone = 20000;
      for (let round = 0; round < 30; round += 1) {
        const kind = rand();
        if (kind < 0.3) {
          const res = await call(t.app, 'POST', '/api/voters', {
            token: owner.token,
            body: {
              name: `${person()} new ${round}`,
              phone: `+9198765${String((phone += 1)).padStart(5, '0')}`,
              booth: pick(['1', '2']),
              constituency: pick(constituencies),
            },
          });
          expect(res.status).toBe(201);
          ids.push(res.body.data.id);
        } else if (kind < 0.5) {
          const id = ids.splice(Math.floor(rand() * ids.length), 1)[0]!;
          expect((await call(t.app, 'DELETE', `/api/voters/${id}`, { token: owner.token })).status).toBe(200);
        } else {
          const body: Record<string, string | null> = {};
          if (rand() < 0.5) body.name = `${person()} edit ${round}`;
          if (rand() < 0.3) body.email = rand() < 0.5 ? `e${round}@rediffmail.com` : `e${round}@example.org`;
          if (rand() < 0.3) body.booth = pick(['1', '2', '3']);
          if (rand() < 0.3) body.ward = pick(['1', '2', '3']);
          if (rand() < 0.3) body.constituency = pick(constituencies);
          if (rand() < 0.2) body.phone = `+9198765${String((phone += 1)).padStart(5, '0')}`;
          if (Object.keys(body).length === 0) body.address = `House ${round}`;
          const res = await call(t.app, 'PUT', `/api/voters/${pick(ids)}`, { token: owner.token, body });
          expect(res.status).toBe(200);
        }
        await expectListsTrue();
      }
      // Most answers after a change were brought forward: the lists without a search after every change, the
      // searches after every create and edit (a deleted voter's text is not kept). The term cased outside
      // ASCII was counted again every time.
      expect(memoStats.advanced - advanced).toBeGreaterThan(30 * 6);
      expect(memoStats.computed - computed).toBeGreaterThanOrEqual(30);

      // A bulk change is not logged: every list counts again, and is still true.
      const bulk = ['name,phone,booth'];
      for (let i = 0; i < 150; i += 1) bulk.push(`Bulk Kumar ${i},+9198766${String(i).padStart(5, '0')},2`);
      expect((await importCsv(t.app, owner.token, bulk.join('\n'))).body.data.imported).toBe(150);
      const before = memoStats.computed;
      await expectListsTrue();
      expect(memoStats.computed - before).toBe(filterSets.length);
    }, 120_000);

    it('stay exact in one process while another writes at the same time', async () => {
      const [reader, writer, closeBoth] = await buildTwoApps(dialect);
      try {
        const office = await register(reader.app);
        const lines = ['name,phone,booth'];
        for (let i = 0; i < 1500; i += 1)
          lines.push(`Kumar ${i},+9198768${String(i).padStart(5, '0')},${i % 3}`);
        expect((await importCsv(reader.app, office.token, lines.join('\n'))).body.data.imported).toBe(1500);
        const lists = ['', '&booth=1', '&search=kumar%201', '&search=kumar&booth=2'];
        const list = (app: TestApp['app'], query: string, page = 1) =>
          call(app, 'GET', `/api/voters?per_page=100&page=${page}${query}`, { token: office.token });
        let writing = true;
        const rand = random(dialect === 'sqlite' ? 3 : 5);
        const writes = (async () => {
          try {
            for (let i = 0; i < 60; i += 1) {
              const page = (await list(writer.app, '', 1 + Math.floor(rand() * 15))).body.data.data;
              const target = page[Math.floor(rand() * page.length)]?.id as number | undefined;
              const kind = rand();
              if (kind < 0.3 || !target) {
                await call(writer.app, 'POST', '/api/voters', {
                  token: office.token,
                  body: {
                    name: `Kumar New ${i}`,
                    phone: `+9198769${String(i).padStart(5, '0')}`,
                    booth: '1',
                  },
                });
              } else if (kind < 0.5) {
                await call(writer.app, 'DELETE', `/api/voters/${target}`, { token: office.token });
              } else {
                await call(writer.app, 'PUT', `/api/voters/${target}`, {
                  token: office.token,
                  body: { name: rand() < 0.5 ? `Other ${i}` : `Kumar 1${i}`, booth: String(i % 3) },
                });
              }
            }
          } finally {
            writing = false;
          }
        })();
        let reads = 0;
        const reading = (async () => {
          while (writing)
            for (const q of lists) {
              await list(reader.app, q, 1 + Math.floor(rand() * 16));
              reads += 1;
              // Injected requests on SQLite never leave the microtask queue: let the writer's turn come.
              await new Promise((resolve) => setImmediate(resolve));
            }
        })();
        const advanced = memoStats.advanced;
        await Promise.all([writes, reading]);
        expect(reads).toBeGreaterThan(30);
        expect(memoStats.advanced).toBeGreaterThan(advanced);
        // Once the writes stop, every remembered answer, brought forward through all of them, is the truth.
        for (const q of lists) {
          const filters = Object.fromEntries(new URLSearchParams(q.slice(1)));
          const ids = await matchingIds(reader, office.user.workspace_id, filters);
          for (const page of [1, 8, 12, 15, 16]) {
            const res = await list(reader.app, q, page);
            expect({ q, page, total: res.body.data.total }).toEqual({ q, page, total: ids.length });
            expect(res.body.data.data.map((v: { id: number }) => v.id)).toEqual(
              ids.slice((page - 1) * 100, page * 100),
            );
          }
        }
      } finally {
        await closeBoth();
      }
    }, 120_000);

    it('log one row per small change, none for a bulk one, and keep the last 256 versions', async () => {
      const office = await register(t.app);
      const ws = office.user.workspace_id;
      const changes = () =>
        t.db.kysely
          .selectFrom('voter_changes')
          .select(['version', 'voter_id'])
          .where('workspace_id', '=', ws)
          .execute();
      const bulk = ['name,phone'];
      for (let i = 0; i < 150; i += 1) bulk.push(`Bulk ${i},+9198767${String(i).padStart(5, '0')}`);
      expect((await importCsv(t.app, office.token, bulk.join('\n'))).body.data.imported).toBe(150);
      expect(await changes()).toEqual([]);
      const made = await call(t.app, 'POST', '/api/voters', {
        token: office.token,
        body: { name: 'Logged One', phone: '+919876799999' },
      });
      const logged = await changes();
      expect(logged.map((c) => Number(c.voter_id))).toEqual([made.body.data.id]);
      for (let i = 0; i < 300; i += 1)
        await t.db.kysely
          .updateTable('voters')
          .set({ booth: String(i) })
          .where('id', '=', made.body.data.id)
          .execute();
      const kept = (await changes()).map((c) => Number(c.version));
      const { version } = await t.db.kysely
        .selectFrom('voter_counts')
        .select('version')
        .where('workspace_id', '=', ws)
        .executeTakeFirstOrThrow();
      expect(Math.max(...kept)).toBe(Number(version));
      expect(Math.min(...kept)).toBe(Number(version) - 255);
      expect(kept).toHaveLength(256);

      // A delete forgets who the voter was: its earlier rows go, and its own row keeps only where it was.
      const gone = await call(t.app, 'POST', '/api/voters', {
        token: office.token,
        body: { name: 'Forget Me', phone: '+919876799998', email: 'forget.me@example.com', booth: '9' },
      });
      await call(t.app, 'PUT', `/api/voters/${gone.body.data.id}`, {
        token: office.token,
        body: { name: 'Forget Me Too', email: null },
      });
      expect(
        (await call(t.app, 'DELETE', `/api/voters/${gone.body.data.id}`, { token: office.token })).status,
      ).toBe(200);
      const left = await t.db.kysely
        .selectFrom('voter_changes')
        .selectAll()
        .where('voter_id', '=', gone.body.data.id)
        .execute();
      expect(left).toEqual([
        expect.objectContaining({
          op: 'delete',
          old_name: null,
          old_email: null,
          old_phone: null,
          old_booth: '9',
        }),
      ]);
      expect(JSON.stringify(await t.db.kysely.selectFrom('voter_changes').selectAll().execute())).not.toMatch(
        /Forget Me|forget\.me|9876799998/,
      );

      // Nothing is kept longer than ten minutes: the delivery worker sweeps the log as it starts a round.
      await t.db.kysely.updateTable('voter_changes').set({ at: 0 }).where('workspace_id', '=', ws).execute();
      const worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
      await worker.round();
      expect(await changes()).toEqual([]);
      await call(t.app, 'PUT', `/api/voters/${made.body.data.id}`, {
        token: office.token,
        body: { ward: '2' },
      });
      const now = Math.floor(Date.now() / 1000);
      await pruneVoterChanges(t.db.kysely, now + 590);
      expect(await changes()).toHaveLength(1);
      await pruneVoterChanges(t.db.kysely, now + 602);
      expect(await changes()).toEqual([]);
    });
  });
}
