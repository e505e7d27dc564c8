import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import {
  type Account,
  addMember,
  buildTestApp,
  call,
  dialects,
  expectError,
  importCsv,
  register,
  type TestApp,
  uniquePhone,
} from './helpers.ts';
import { isolatedDatabase, until } from './messaging-helpers.ts';

const silent = pino({ level: 'silent' });
const hour = 3_600_000;
const at = (offsetMs: number) => new Date(Date.now() + offsetMs).toISOString();

/**
 * Places (the contract's fourth part): constituencies, wards and booths with aliases, and one place-name normal
 * form wherever a place is compared. Issue 37's defects: a silence period for "Varanasi" let a bulk SMS reach a
 * voter of "वाराणसी", and a "Ward 12" segment missed "ward 12".
 */
for (const dialect of dialects) {
  describe(`places (${dialect})`, () => {
    let t: TestApp;
    let worker: DeliveryWorker;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      t = await buildTestApp(dialect, { ...database.env, SANDBOX_DELIVERY_DELAY_MS: '0' });
      worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
    });

    const place = (who: Account, body: unknown) =>
      call(t.app, 'POST', '/api/places', { token: who.token, body });
    const voter = (who: Account, body: Record<string, unknown>) =>
      call(t.app, 'POST', '/api/voters', { token: who.token, body: { phone: uniquePhone(), ...body } });
    const names = async (who: Account, query: string) =>
      (await call(t.app, 'GET', `/api/voters?${query}`, { token: who.token })).body.data.data
        .map((v: { name: string }) => v.name)
        .sort();

    it('keeps places with aliases: everyone reads, politicians and managers write, a name used twice is 409', async () => {
      const owner = await register(t.app);
      const manager = await addMember(t.app, owner, 'manager');
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const created = await place(manager, {
        kind: 'constituency',
        name: ' Varanasi ',
        aliases: ['वाराणसी', 'Banaras', 'VARANASI', 'banaras'],
        code: '390',
      });
      expect(created.status).toBe(201);
      // The name once, each alias once in the normal form (one spelling per key).
      expect(created.body.data).toMatchObject({
        kind: 'constituency',
        name: 'Varanasi',
        aliases: ['वाराणसी', 'Banaras'],
        code: '390',
      });
      const id = created.body.data.id;
      const list = await call(t.app, 'GET', '/api/places?kind=constituency', { token: volunteer.token });
      expect(list.status).toBe(200);
      expect(list.body.data.data.map((p: { id: number }) => p.id)).toEqual([id]);
      expectError(await place(volunteer, { kind: 'ward', name: '1' }), 403, 'forbidden');
      // Another constituency may not take a name or alias of this one, in any case or spacing.
      const taken = await place(owner, { kind: 'constituency', name: 'Kashi', aliases: ['  banaras'] });
      expectError(taken, 409, 'conflict');
      expect(taken.body.message).toContain('Varanasi');
      expectError(await place(owner, { kind: 'constituency', name: 'वाराणसी' }), 409, 'conflict');
      // A ward may share a constituency's name: names are unique per kind.
      expect((await place(owner, { kind: 'ward', name: 'Varanasi' })).status).toBe(201);
      // Bad input: the field named, nothing written.
      for (const [body, field] of [
        [{ kind: 'ward', name: '   ' }, 'name'],
        [{ kind: 'ward', name: 'x', aliases: ['ok', ' '] }, 'aliases.1'],
        [{ kind: 'booth', name: 'x'.repeat(21) }, 'name'],
        [{ kind: 'ward', name: 'x', aliases: Array.from({ length: 51 }, (_, i) => `a${i}`) }, 'aliases'],
        [{ kind: 'street', name: 'x' }, 'kind'],
      ] as const) {
        const res = await place(owner, body);
        expectError(res, 422, 'validation_error');
        expect(Object.keys(res.body.details ?? {}).join(' ')).toContain(field);
      }
      const patched = await call(t.app, 'PATCH', `/api/places/${id}`, {
        token: owner.token,
        body: { aliases: ['Kashi'] },
      });
      expect(patched.status).toBe(200);
      expect(patched.body.data.aliases).toEqual(['Kashi']);
      // Banaras is free again; Kashi is not.
      expect((await place(owner, { kind: 'constituency', name: 'Banaras' })).status).toBe(201);
      expectError(await place(owner, { kind: 'constituency', name: 'kashi' }), 409, 'conflict');
      const stranger = await register(t.app);
      expectError(await call(t.app, 'GET', `/api/places/${id}`, { token: stranger.token }), 404, 'not_found');
      expectError(
        await call(t.app, 'DELETE', `/api/places/${id}`, { token: stranger.token }),
        404,
        'not_found',
      );
      expect((await call(t.app, 'DELETE', `/api/places/${id}`, { token: owner.token })).status).toBe(200);
      expect((await place(owner, { kind: 'constituency', name: 'Kashi' })).status).toBe(201);
    });

    it('two offices adding the same name at once: one place, the other 409', async () => {
      const owner = await register(t.app);
      const answers = await Promise.all(
        Array.from({ length: 6 }, (_, i) => place(owner, { kind: 'booth', name: i % 2 ? '101' : ' 101 ' })),
      );
      expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
      for (const a of answers.filter((a) => a.status !== 201)) expectError(a, 409, 'conflict');
    });

    it('without places, wards and booths match in any case and spacing (a "Ward 12" segment finds "ward 12")', async () => {
      const owner = await register(t.app);
      await voter(owner, { name: 'Upper', ward: 'Ward 12', booth: 'B-7' });
      await voter(owner, { name: 'Lower', ward: 'ward  12', booth: 'b-7' });
      await voter(owner, { name: 'Other', ward: 'Ward 13', booth: 'B-8' });
      expect(await names(owner, 'ward=WARD%2012')).toEqual(['Lower', 'Upper']);
      expect(await names(owner, 'booth=b-7')).toEqual(['Lower', 'Upper']);
      const segment = await call(t.app, 'POST', '/api/segments', {
        token: owner.token,
        body: { name: 'Ward 12', filters: { ward: 'Ward 12' } },
      });
      expect(segment.status).toBe(201);
      const read = await call(t.app, 'GET', `/api/segments/${segment.body.data.id}`, { token: owner.token });
      expect(read.body.data.voter_count).toBe(2);
      const broadcast = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Ward meeting', segment_id: segment.body.data.id },
      });
      expect(broadcast.status).toBe(202);
      expect(broadcast.body.data.total_recipients).toBe(2);
    });

    it('a place matches by any alias: filters, coverage, and a silence period for "Varanasi" holds "वाराणसी"', async () => {
      const owner = await register(t.app);
      const ws = owner.user.workspace_id;
      await place(owner, { kind: 'constituency', name: 'Varanasi', aliases: ['वाराणसी'] });
      await place(owner, { kind: 'ward', name: 'Ward 12', aliases: ['12', 'वार्ड 12'] });
      const hindi = uniquePhone();
      const latin = uniquePhone();
      const elsewhere = uniquePhone();
      await voter(owner, { name: 'Hindi', phone: hindi, constituency: 'वाराणसी', ward: 'वार्ड 12' });
      await voter(owner, { name: 'Latin', phone: latin, constituency: 'varanasi', ward: '12' });
      await voter(owner, { name: 'Elsewhere', phone: elsewhere, constituency: 'Amethi', ward: '13' });
      expect(await names(owner, 'constituency=Varanasi')).toEqual(['Hindi', 'Latin']);
      expect(await names(owner, `constituency=${encodeURIComponent('वाराणसी')}`)).toEqual(['Hindi', 'Latin']);
      expect(await names(owner, 'ward=ward%2012')).toEqual(['Hindi', 'Latin']);
      // A volunteer covering ward "12" sees both voters of Ward 12, whatever the roll calls it.
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const covered = await call(t.app, 'PATCH', `/api/users/${volunteer.user.id}`, {
        token: owner.token,
        body: { coverage: { wards: ['12'] } },
      });
      expect(covered.status).toBe(200);
      expect(await names(volunteer, '')).toEqual(['Hindi', 'Latin']);

      const period = await call(t.app, 'POST', '/api/silence-periods', {
        token: owner.token,
        body: { constituency: 'Varanasi', starts_at: at(-hour), ends_at: at(hour) },
      });
      expect(period.status).toBe(201);
      const res = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Rally tomorrow', recipients: [hindi, latin, elsewhere] },
      });
      expect(res.status).toBe(202);
      const id = Number(String(res.body.data.campaign_id).slice(5));
      await until(async () => {
        await worker.drain();
        const c = await call(t.app, 'GET', `/api/campaigns/camp_${id}`, { token: owner.token });
        return c.body.data.status === 'completed';
      }, 'the broadcast to complete');
      const rows = await t.db.kysely
        .selectFrom('messages')
        .select(['to', 'status', 'error_code'])
        .where('campaign_id', '=', id)
        .where('workspace_id', '=', ws)
        .execute();
      const byPhone = new Map(rows.map((r) => [r.to, [r.status, r.error_code]]));
      expect(byPhone.get(hindi)).toEqual(['failed', 'silence_period']);
      expect(byPhone.get(latin)).toEqual(['failed', 'silence_period']);
      expect(byPhone.get(elsewhere)).toEqual(['delivered', null]);
    });

    it('an import lists its values that match no place, for the kinds the workspace keeps', async () => {
      const owner = await register(t.app);
      await place(owner, { kind: 'ward', name: 'Ward 1', aliases: ['1'] });
      const csv = [
        'name,phone,constituency,ward,booth',
        `A,${uniquePhone()},Varanasi,ward 1,7`,
        `B,${uniquePhone()},Varanasi,1,7`,
        `C,${uniquePhone()},Varanasi,Ward 2,8`,
        `D,${uniquePhone()},Varanasi,ward  2,8`,
        `E,${uniquePhone()},Varanasi,Ward 10,8`,
      ].join('\n');
      const res = await importCsv(t.app, owner.token, csv);
      expect(res.status).toBe(200);
      expect(res.body.data.imported).toBe(5);
      // Only wards: the workspace keeps no constituencies or booths, so none of those is "unknown".
      expect(res.body.data.unknown_places).toEqual({ ward: ['Ward 2', 'Ward 10'] });
      // Once "Ward 2" is a place, the same file lists only Ward 10.
      await place(owner, { kind: 'ward', name: 'Ward 2' });
      const again = await importCsv(t.app, owner.token, csv);
      expect(again.body.data.unknown_places).toEqual({ ward: ['Ward 10'] });
    });
  });
}
