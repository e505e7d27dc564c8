import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, call, register, uniquePhone, type TestApp } from './helpers.ts';

/**
 * A message the provider accepted is never recorded as failed or refunded (the fourth part's "Seams"): when
 * recording the hand-over fails, it is tried again. Here the database refuses to mark messages sent (a trigger)
 * for the first 300 ms after the provider took the message.
 */
describe('recording a hand-over (sqlite)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp('sqlite');
  });
  afterAll(() => t.close());

  it('a hand-over the database refuses at first is tried again: sent once, charged, never failed or refunded', async () => {
    const owner = await register(t.app);
    await sql`CREATE TABLE handover_fault (on_ INTEGER)`.execute(t.db.kysely);
    await sql`INSERT INTO handover_fault VALUES (1)`.execute(t.db.kysely);
    await sql`CREATE TRIGGER handover_fails BEFORE UPDATE OF status ON messages
      WHEN NEW.status = 'sent' AND EXISTS (SELECT 1 FROM handover_fault)
      BEGIN SELECT RAISE(ABORT, 'the disk refused the write (test)'); END`.execute(t.db.kysely);
    const healed = new Promise((resolve) =>
      setTimeout(() => void sql`DELETE FROM handover_fault`.execute(t.db.kysely).then(resolve), 300),
    );
    const to = uniquePhone();
    const before = t.providers.sms.sent.length;
    const res = await call(t.app, 'POST', '/api/messages/send', {
      token: owner.token,
      body: { channel: 'sms', to, message: 'Rally at 5' },
    });
    await healed;
    expect(res.status, res.raw).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'sent' });
    expect(t.providers.sms.sent.slice(before).filter((m) => m.to === to)).toHaveLength(1);
    const history = await call(t.app, 'GET', '/api/messages/history', { token: owner.token });
    expect(history.body.data.data.map((m: { status: string }) => m.status)).toEqual(['sent']);
    const ledger = await call(t.app, 'GET', '/api/credits/ledger', { token: owner.token });
    const reasons = ledger.body.data.data.map((e: { reason: string }) => e.reason);
    expect(reasons).toContain('charge');
    expect(reasons).not.toContain('refund');
    await sql`DROP TRIGGER handover_fails`.execute(t.db.kysely);
  });
});
