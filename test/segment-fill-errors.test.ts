import pino from 'pino';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { buildTestApp, call, register, type TestApp } from './helpers.ts';
import { insertVoters } from './messaging-helpers.ts';

const silent = pino({ level: 'silent' });

/**
 * A segment campaign whose segment cannot be read when the outbox is filled (a database error, not a deleted
 * segment) is not shrunk: the fill stops, the campaign stays queued with its credits, and the next fill sends
 * to every voter. Before, any error was taken for "segment deleted": the recipients were dropped, refunded,
 * and the campaign went on as `sending` with none of them.
 */
describe('a segment read that fails while filling a campaign', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp('sqlite');
  });
  afterAll(() => t.close());

  it('stops the fill (the error is raised) and a later fill sends to every voter', async () => {
    const owner = await register(t.app);
    const ws = owner.user.workspace_id;
    await insertVoters(t, ws, 30, (i) => ({ phone: `+9198765${String(i).padStart(5, '0')}` }));
    const segment = await call(t.app, 'POST', '/api/segments', {
      token: owner.token,
      body: { name: 'All', filters: {} },
    });
    const res = await call(t.app, 'POST', '/api/messages/broadcast', {
      token: owner.token,
      body: { channel: 'sms', message: 'Rally', segment_id: segment.body.data.id },
    });
    expect(res.status).toBe(202);
    const id = Number(String(res.body.data.campaign_id).slice(5));
    const worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });

    // The segments table cannot be read for a moment (as a database error would have it).
    await sql`ALTER TABLE segments RENAME TO segments_away`.execute(t.db.kysely);
    await expect(worker.campaigns.fillNext()).rejects.toThrow(/segments/);
    await sql`ALTER TABLE segments_away RENAME TO segments`.execute(t.db.kysely);
    const held = await call(t.app, 'GET', `/api/campaigns/camp_${id}`, { token: owner.token });
    expect(held.body.data).toMatchObject({ status: 'queued', total_recipients: 30 });

    // Its claim's lease runs out; the next fill sends to all thirty.
    await t.db.kysely.updateTable('campaigns').set({ lease_until: null }).where('id', '=', id).execute();
    await worker.drain();
    const done = await call(t.app, 'GET', `/api/campaigns/camp_${id}`, { token: owner.token });
    expect(done.body.data.total_recipients).toBe(30);
    expect(done.body.data.stats.delivered + done.body.data.stats.sent).toBe(30);
  });
});
