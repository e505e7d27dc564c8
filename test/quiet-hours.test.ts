import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.ts';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { parseWindow, quietUntil } from '../src/lib/quiet-hours.ts';
import {
  type Account,
  buildTestApp,
  call,
  dialects,
  expectError,
  register,
  type TestApp,
  uniquePhone,
} from './helpers.ts';
import { insertVoters, isolatedDatabase } from './messaging-helpers.ts';

const silent = pino({ level: 'silent' });
const kolkata = { ...parseWindow('21:00-10:00')!, timeZone: 'Asia/Kolkata', text: '21:00-10:00' };

/** A day at least two days ahead (messages created now are due then), at `hhmm` UTC. */
function ahead(hhmm: string, days = 2): Date {
  const day = new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);
  return new Date(`${day}T${hhmm}:00.000Z`);
}

describe('quiet hours settings and window', () => {
  it('defaults to 21:00-10:00 in Asia/Kolkata; empty turns it off; bad values name the setting', () => {
    const config = loadConfig({});
    expect(config.quietHours).toMatchObject({
      startMinute: 21 * 60,
      endMinute: 10 * 60,
      timeZone: 'Asia/Kolkata',
    });
    expect(loadConfig({ QUIET_HOURS: '' }).quietHours).toBeUndefined();
    expect(
      loadConfig({ QUIET_HOURS: '22:30-06:00', QUIET_HOURS_TZ: 'Europe/London' }).quietHours,
    ).toMatchObject({
      startMinute: 22 * 60 + 30,
      endMinute: 6 * 60,
      timeZone: 'Europe/London',
    });
    for (const bad of ['21-10', '25:00-10:00', '10:00-10:00', 'night']) {
      expect(() => loadConfig({ QUIET_HOURS: bad })).toThrow(/QUIET_HOURS/);
    }
    expect(() => loadConfig({ QUIET_HOURS_TZ: 'Mars/Olympus' })).toThrow(ConfigError);
    expect(() => loadConfig({ QUIET_HOURS_TZ: 'Mars/Olympus' })).toThrow(/QUIET_HOURS_TZ/);
  });

  it('knows when the window ends, across midnight and in the zone', () => {
    // 21:00 IST is 15:30 UTC, 10:00 IST is 04:30 UTC.
    expect(quietUntil(kolkata, new Date('2026-11-24T15:29:59Z'))).toBeUndefined();
    expect(quietUntil(kolkata, new Date('2026-11-24T15:30:00Z'))?.toISOString()).toBe(
      '2026-11-25T04:30:00.000Z',
    );
    expect(quietUntil(kolkata, new Date('2026-11-24T20:00:00.250Z'))?.toISOString()).toBe(
      '2026-11-25T04:30:00.000Z',
    );
    expect(quietUntil(kolkata, new Date('2026-11-25T04:29:00Z'))?.toISOString()).toBe(
      '2026-11-25T04:30:00.000Z',
    );
    expect(quietUntil(kolkata, new Date('2026-11-25T04:30:00Z'))).toBeUndefined();
    expect(quietUntil(undefined, new Date('2026-11-24T20:00:00Z'))).toBeUndefined();
    const day = { ...parseWindow('13:00-14:00')!, timeZone: 'UTC', text: '13:00-14:00' };
    expect(quietUntil(day, new Date('2026-11-24T13:15:00Z'))?.toISOString()).toBe('2026-11-24T14:00:00.000Z');
    expect(quietUntil(day, new Date('2026-11-24T14:15:00Z'))).toBeUndefined();
  });
});

for (const dialect of dialects) {
  describe(`quiet hours in delivery (${dialect})`, () => {
    let t: TestApp;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    let clock = new Date();
    let worker: DeliveryWorker;
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      t = await buildTestApp(dialect, {
        ...database.env,
        SANDBOX_DELIVERY_DELAY_MS: '0',
        QUIET_HOURS: '21:00-10:00',
        QUIET_HOURS_TZ: 'Asia/Kolkata',
      });
      worker = new DeliveryWorker({
        db: t.db,
        config: t.config,
        providers: t.providers,
        log: silent,
        clock: () => clock,
      });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
    });

    const statuses = async (campaignRef: string) =>
      (
        await t.db.kysely
          .selectFrom('messages')
          .select(['channel', 'status'])
          .where('campaign_id', '=', Number(campaignRef.slice(5)))
          .execute()
      ).map((m) => m.status);
    const broadcast = async (owner: Account, channel: string, recipients: string[]) => {
      const res = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: {
          channel,
          message: 'Rally at 5',
          recipients,
          ...(channel === 'email' ? { subject: 'Rally' } : {}),
        },
      });
      expect(res.status).toBe(202);
      return res.body.data.campaign_id as string;
    };

    it('holds bulk sms, whatsapp and ivr inside the window and releases them when it ends', async () => {
      const owner = await register(t.app);
      clock = ahead('17:00'); // 22:30 IST
      const sms = await broadcast(owner, 'sms', [uniquePhone(), uniquePhone()]);
      const whatsapp = await broadcast(owner, 'whatsapp', [uniquePhone()]);
      const ivr = await broadcast(owner, 'ivr', [uniquePhone()]);
      const email = await broadcast(owner, 'email', ['voter.one@example.com']);
      await worker.drain();
      expect(await statuses(sms)).toEqual(['queued', 'queued']);
      expect(await statuses(whatsapp)).toEqual(['queued']);
      expect(await statuses(ivr)).toEqual(['queued']);
      // Email is not held.
      expect(await statuses(email)).toEqual(['delivered']);
      // Held until 10:00 IST (04:30 UTC) the next day: still held at 09:59 IST.
      const held = await t.db.kysely
        .selectFrom('messages')
        .select('next_attempt_at')
        .where('campaign_id', '=', Number(sms.slice(5)))
        .execute();
      const release = new Date(clock.getTime() + 86_400_000).toISOString().slice(0, 10) + 'T04:30:00.000Z';
      expect(held.map((h) => new Date(h.next_attempt_at).toISOString())).toEqual([release, release]);
      clock = new Date(new Date(release).getTime() - 60_000);
      await worker.drain();
      expect(await statuses(sms)).toEqual(['queued', 'queued']);
      // The window ends: out they go, with no one waiting.
      clock = new Date(release);
      await worker.drain();
      expect(await statuses(sms)).toEqual(['delivered', 'delivered']);
      expect(await statuses(whatsapp)).toEqual(['delivered']);
      expect(await statuses(ivr)).toEqual(['delivered']);
      const campaign = await call(t.app, 'GET', `/api/campaigns/${sms}`, { token: owner.token });
      expect(campaign.body.data.status).toBe('completed');
    });

    it('previews a campaign: opted out, silence period and quiet hours, at its scheduled time', async () => {
      const owner = await register(t.app);
      const ws = owner.user.workspace_id;
      const phones = Array.from({ length: 5 }, () => uniquePhone());
      await insertVoters(t, ws, 5, (i) => ({
        phone: phones[i]!,
        constituency: ['North', 'North', 'South', 'South', 'South'][i],
      }));
      const extra = uniquePhone();
      for (const address of [phones[0], phones[2], extra]) {
        await call(t.app, 'POST', '/api/opt-outs', { token: owner.token, body: { address, channel: 'all' } });
      }
      const when = ahead('17:00'); // 22:30 IST: inside quiet hours
      await call(t.app, 'POST', '/api/silence-periods', {
        token: owner.token,
        body: {
          constituency: 'north',
          starts_at: new Date(when.getTime() - 3_600_000).toISOString(),
          ends_at: new Date(when.getTime() + 3_600_000).toISOString(),
        },
      });
      const segment = await call(t.app, 'POST', '/api/segments', {
        token: owner.token,
        body: { name: 'All', filters: {} },
      });
      const created = await call(t.app, 'POST', '/api/campaigns', {
        token: owner.token,
        body: {
          name: 'Phase 2',
          channel: 'sms',
          message: 'Vote on Thursday',
          segment_id: segment.body.data.id,
          recipients: [extra, uniquePhone(), phones[4]],
          scheduled_at: when.toISOString(),
        },
      });
      expect(created.status).toBe(201);
      const id = created.body.data.id as string;
      const res = await call(t.app, 'POST', `/api/campaigns/${id}/preview`, { token: owner.token });
      expect(res.status).toBe(200);
      const release = new Date(when.getTime() + 86_400_000).toISOString().slice(0, 10) + 'T04:30:00.000Z';
      // 5 voters + 2 explicit recipients not in the segment = 7; opted out: phones[0], phones[2], extra;
      // silenced: phones[1] (North); the other 3 go, held until 10:00 IST.
      expect(res.body.data).toEqual({
        campaign_id: id,
        channel: 'sms',
        evaluated_at: when.toISOString(),
        total_recipients: 7,
        opted_out: 3,
        silence_period: 1,
        skipped_no_address: 0,
        to_send: 3,
        held: 3,
        held_until: release,
        estimated_credits: 3,
        // The preview is the send: Send reserves every recipient's credit (the skipped are refunded).
        credits_to_reserve: 7,
        credits_available: expect.any(Number),
      });
      // Email: not ruled by silence or quiet hours.
      const email = await call(t.app, 'POST', '/api/campaigns', {
        token: owner.token,
        body: { name: 'Mail', channel: 'email', subject: 'Hi', message: 'Hi', recipients: ['a@example.com'] },
      });
      const mail = await call(t.app, 'POST', `/api/campaigns/${email.body.data.id}/preview`, {
        token: owner.token,
      });
      expect(mail.body.data).toMatchObject({ total_recipients: 1, to_send: 1, held: 0, held_until: null });
      const stranger = await register(t.app);
      expectError(
        await call(t.app, 'POST', `/api/campaigns/${id}/preview`, { token: stranger.token }),
        404,
        'not_found',
      );
      await call(t.app, 'POST', `/api/campaigns/${email.body.data.id}/send`, { token: owner.token });
      expectError(
        await call(t.app, 'POST', `/api/campaigns/${email.body.data.id}/preview`, { token: owner.token }),
        409,
        'conflict',
      );
    });

    it('does not hold single sends, nor bulk messages outside the window', async () => {
      const owner = await register(t.app);
      clock = ahead('17:00');
      const send = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: uniquePhone(), message: 'Your OTP-free reminder' },
      });
      expect(send.status).toBe(201);
      expect(send.body.data.status).toBe('sent');
      clock = ahead('06:00'); // 11:30 IST
      const sms = await broadcast(owner, 'sms', [uniquePhone()]);
      await worker.drain();
      expect(await statuses(sms)).toEqual(['delivered']);
    });
  });
}
