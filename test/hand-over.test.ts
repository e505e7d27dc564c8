/**
 * One hand-over (the contract's fifth part, "One outbox"): a single send and a campaign's message are handed to
 * a provider by one function with one reading of the answer, so the same answer gives the same `error_code` on
 * both paths.
 */
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { finalCode } from '../src/modules/sending/hand-over.ts';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { ProviderError } from '../src/providers/provider.ts';
import { isolatedDatabase } from './messaging-helpers.ts';
import { buildTestApp, call, dialects, register, type TestApp, uniquePhone } from './helpers.ts';

const silent = pino({ level: 'silent' });

it('a refusal left to retry ends as the provider throughput or as undeliverable; any other keeps its code', () => {
  expect(finalCode({ code: 'rate_limited', retryable: true })).toBe('rate_limited');
  expect(finalCode({ code: 'provider_rejected', retryable: true })).toBe('undeliverable');
  expect(finalCode({ code: 'auth_failed', retryable: false })).toBe('auth_failed');
});

for (const dialect of dialects) {
  describe(`one hand-over (${dialect})`, () => {
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

    /** The failed message's code, sent alone and as a campaign's, with the SMS provider answering as `fails`. */
    async function bothPaths(fails: () => Error) {
      const sms = t.providers.sms;
      const send = sms.send.bind(sms);
      sms.send = () => Promise.reject(fails());
      try {
        const owner = await register(t.app);
        const single = await call(t.app, 'POST', '/api/messages/send', {
          token: owner.token,
          body: { channel: 'sms', to: uniquePhone(), message: 'Rally at 5' },
        });
        expect(single.status, single.raw).toBe(502);
        const alone = await call(t.app, 'GET', `/api/messages/${single.body.details.id as string}`, {
          token: owner.token,
        });
        const campaign = await call(t.app, 'POST', '/api/campaigns', {
          token: owner.token,
          body: { name: 'Rally', channel: 'sms', message: 'Rally at 5', recipients: [uniquePhone()] },
        });
        expect(campaign.status, campaign.raw).toBe(201);
        const started = await call(t.app, 'POST', `/api/campaigns/${campaign.body.data.id as string}/send`, {
          token: owner.token,
        });
        expect(started.status, started.raw).toBe(202);
        await worker.drain();
        const sent = await call(t.app, 'GET', `/api/campaigns/${campaign.body.data.id as string}/messages`, {
          token: owner.token,
        });
        return [alone.body.data, sent.body.data.data[0]] as Array<{ status: string; error_code: string }>;
      } finally {
        sms.send = send;
      }
    }

    it('an adapter that cannot read an answer: provider_rejected on both, not tried again', async () => {
      const [alone, queued] = await bothPaths(
        () => new TypeError("Cannot read properties of undefined (reading 'sid')"),
      );
      expect(alone).toMatchObject({ status: 'failed', error_code: 'provider_rejected' });
      expect(queued).toMatchObject({ status: 'failed', error_code: 'provider_rejected' });
    });

    it('a refusal the provider says why: the same code on both', async () => {
      const [alone, queued] = await bothPaths(
        () => new ProviderError('MSG91 answered 400: invalid number', false, 'invalid_recipient'),
      );
      expect(alone).toMatchObject({ status: 'failed', error_code: 'invalid_recipient' });
      expect(queued).toMatchObject({ status: 'failed', error_code: 'invalid_recipient' });
    });
  });
}
