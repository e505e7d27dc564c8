import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { placeKey, placeText } from '../src/lib/place.ts';
import { up as normalisePlaceNames } from '../src/db/migrations/2026_11_25_020_place_names.ts';
import { buildTestApp, call, dialects, importCsv, register, type TestApp, uniquePhone } from './helpers.ts';
import { isolatedDatabase, until } from './messaging-helpers.ts';

const silent = pino({ level: 'silent' });
const hour = 3_600_000;
const at = (offsetMs: number) => new Date(Date.now() + offsetMs).toISOString();

/** How rolls spell "North Delhi": two spaces, a no-break space, a zero-width space, full-width letters, a tab. */
const spellings = [
  'North  Delhi',
  'North\u00a0Delhi',
  'North Delhi\u200b',
  '\uff2e\uff4f\uff52\uff54\uff48 Delhi',
  ' north\tDELHI ',
  'Nor\u200bth Delhi',
];

describe('place names: one normalisation', () => {
  it('NFKC, format characters dropped, whitespace collapsed, trimmed; the key case-folded', () => {
    for (const spelling of spellings)
      expect(placeKey(spelling), JSON.stringify(spelling)).toBe('north delhi');
    expect(placeText('North\u00a0 Delhi\u200b')).toBe('North Delhi');
    expect(placeText('  Ward 12 ')).toBe('Ward 12');
    expect(placeKey('South Delhi')).not.toBe('north delhi');
  });
});

for (const dialect of dialects) {
  describe(`place names across voters, filters, silence periods and previews (${dialect})`, () => {
    let t: TestApp;
    let worker: DeliveryWorker;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      t = await buildTestApp(dialect, database.env);
      worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
    });

    it('a silence period for "North Delhi" holds for every spelling, through the preview, the send and filters', async () => {
      const owner = await register(t.app);
      const phones = spellings.map(() => uniquePhone());
      // Half through the API, half through an import.
      for (let i = 0; i < 3; i++) {
        const res = await call(t.app, 'POST', '/api/voters', {
          token: owner.token,
          body: { name: `Voter ${i}`, phone: phones[i], constituency: spellings[i], ward: ' 12\u200b' },
        });
        expect(res.status).toBe(201);
      }
      const csv = ['name,phone,constituency,ward']
        .concat([3, 4, 5].map((i) => `Voter ${i},${phones[i]},"${spellings[i]}",12`))
        .join('\n');
      expect((await importCsv(t.app, owner.token, csv)).status).toBe(200);
      const other = uniquePhone();
      await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Elsewhere', phone: other, constituency: 'South Delhi' },
      });

      // Stored in one form; filters in any spelling find all six.
      const listed = await call(
        t.app,
        'GET',
        `/api/voters?constituency=${encodeURIComponent('NORTH\u00a0delhi ')}&ward=12`,
        {
          token: owner.token,
        },
      );
      expect(listed.status).toBe(200);
      expect(listed.body.data.total).toBe(6);

      const period = await call(t.app, 'POST', '/api/silence-periods', {
        token: owner.token,
        body: { constituency: 'North Delhi', starts_at: at(-hour), ends_at: at(hour) },
      });
      expect(period.status).toBe(201);
      const segment = await call(t.app, 'POST', '/api/segments', {
        token: owner.token,
        body: { name: 'All', filters: {} },
      });
      const draft = await call(t.app, 'POST', '/api/campaigns', {
        token: owner.token,
        body: { name: 'Rally', channel: 'sms', message: 'Vote', segment_id: segment.body.data.id },
      });
      expect(draft.status).toBe(201);
      const preview = await call(t.app, 'POST', `/api/campaigns/${draft.body.data.id}/preview`, {
        token: owner.token,
      });
      expect(preview.status).toBe(200);
      expect(preview.body.data).toMatchObject({ silence_period: 6, to_send: 1 });

      const res = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Vote', segment_id: segment.body.data.id },
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
        .execute();
      const byPhone = new Map(rows.map((r) => [r.to, r.error_code]));
      for (const phone of phones) expect(byPhone.get(phone), phone).toBe('silence_period');
      expect(byPhone.get(other)).toBeNull();
    });

    it('the migration normalises stored names and keys written before it', async () => {
      const owner = await register(t.app);
      const ws = owner.user.workspace_id;
      const now = new Date().toISOString();
      const phone = uniquePhone();
      const inserted = await t.db.kysely
        .insertInto('voters')
        .values({
          workspace_id: ws,
          name: 'Old Row',
          name_key: 'old row',
          phone,
          constituency: 'North\u00a0 Delhi\u200b',
          constituency_key: 'north\u00a0 delhi\u200b',
          booth: ' 7\u200b',
          ward: 'Ward\u00a012',
          created_at: now,
          updated_at: now,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      await normalisePlaceNames(t.db.kysely as never);
      const row = await t.db.kysely
        .selectFrom('voters')
        .select(['constituency', 'constituency_key', 'booth', 'ward'])
        .where('id', '=', inserted.id)
        .executeTakeFirstOrThrow();
      expect(row).toEqual({
        constituency: 'North Delhi',
        constituency_key: 'north delhi',
        booth: '7',
        ward: 'Ward 12',
      });
    });
  });
}
