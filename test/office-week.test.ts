/**
 * An office's first week (the contract's fourth part): phones valid for their country, a grievance opened from a
 * conversation that carries its voter, ward, booth and assignee, the API additions the console needs
 * (`voter_id` filters, the failures aggregate, managers listing the team).
 */
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import {
  addMember,
  buildTestApp,
  call,
  dialects,
  expectError,
  register,
  type TestApp,
  uniquePhone,
} from './helpers.ts';

for (const dialect of dialects) {
  describe(`an office's first week (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
    });
    afterAll(() => t?.close());

    it('an 11-digit number is not a phone: 422 on the voter and on a send', async () => {
      const owner = await register(t.app);
      const voter = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Too Long', phone: '98390100265' },
      });
      expectError(voter, 422, 'validation_error');
      expect(Object.keys(voter.body.details)).toEqual(['phone']);
      const send = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: '+9198390100265', message: 'Hi' },
      });
      expectError(send, 422, 'validation_error');
      expect(Object.keys(send.body.details)).toEqual(['to']);
    });

    it("a grievance opened from a conversation carries the voter as reporter, their ward and booth, and the conversation's assignee", async () => {
      const owner = await register(t.app);
      const volunteer = await addMember(t.app, owner, 'volunteer');
      await call(t.app, 'PATCH', `/api/users/${volunteer.user.id}`, {
        token: owner.token,
        body: { coverage: { wards: ['12'] } },
      });
      const phone = uniquePhone();
      await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Sunita Devi', phone, ward: '12', booth: '45' },
      });
      await call(t.app, 'POST', '/api/inbound', {
        token: owner.token,
        body: { channel: 'sms', from: phone, body: 'No water since Monday' },
      });
      const mine = await call(t.app, 'GET', '/api/conversations', { token: volunteer.token });
      const id = mine.body.data.data[0].id as string;
      const opened = await call(t.app, 'POST', `/api/conversations/${id}/grievance`, {
        token: volunteer.token,
        body: {},
      });
      expect(opened.status, opened.raw).toBe(201);
      expect(opened.body.data).toMatchObject({
        reporter_name: 'Sunita Devi',
        reporter_phone: phone,
        ward: '12',
        booth: '45',
        assigned_to: volunteer.user.id,
      });
      const seen = await call(t.app, 'GET', `/api/grievances/${opened.body.data.id}`, {
        token: volunteer.token,
      });
      expect(seen.status).toBe(200);
    });

    it('history and conversations take voter_id; failures are counted by error code over a window', async () => {
      const owner = await register(t.app);
      const phone = uniquePhone();
      const failing = '+919812340000'; // the sandbox fails a number ending 0000
      const voter = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Asha', phone, email: 'asha.rao@example.org' },
      });
      const voterId = voter.body.data.id as number;
      for (const to of [phone, uniquePhone()])
        await call(t.app, 'POST', '/api/messages/send', {
          token: owner.token,
          body: { channel: 'sms', to, message: 'Rally at 5' },
        });
      await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'email', to: 'asha.rao@example.org', subject: 'Rally', message: 'Rally at 5' },
      });
      // A voter_id past any row id is 422, not a PostgreSQL bigint overflow (a 500 the fuzzer found).
      for (const path of ['/api/messages/history', '/api/conversations'])
        expectError(
          await call(t.app, 'GET', `${path}?voter_id=3.3385729048620414e%2B234`, { token: owner.token }),
          422,
          'validation_error',
        );
      const history = await call(t.app, 'GET', `/api/messages/history?voter_id=${voterId}`, {
        token: owner.token,
      });
      expect(history.body.data.total).toBe(2);
      expect(history.body.data.data.map((m: { to: string }) => m.to).sort()).toEqual(
        ['asha.rao@example.org', phone].sort(),
      );
      expectError(
        await call(t.app, 'GET', '/api/messages/history?voter_id=999999999', { token: owner.token }),
        422,
        'validation_error',
      );
      await call(t.app, 'POST', '/api/inbound', {
        token: owner.token,
        body: { channel: 'sms', from: phone, body: 'Hi' },
      });
      await call(t.app, 'POST', '/api/inbound', {
        token: owner.token,
        body: { channel: 'sms', from: uniquePhone(), body: 'Hello' },
      });
      const conversations = await call(t.app, 'GET', `/api/conversations?voter_id=${voterId}`, {
        token: owner.token,
      });
      expect(conversations.body.data.data).toMatchObject([{ address: phone, voter_id: voterId }]);

      const broadcast = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Rally', recipients: [failing, uniquePhone()] },
      });
      const worker = new DeliveryWorker({
        db: t.db,
        config: t.config,
        providers: t.providers,
        log: pino({ level: 'silent' }),
      });
      await worker.drain();
      // The sandbox settles its deliveries after SANDBOX_DELIVERY_DELAY_MS.
      await new Promise((resolve) => setTimeout(resolve, t.config.sandboxDeliveryDelayMs + 100));
      await worker.drain();
      const failures = await call(t.app, 'GET', '/api/messages/failures', { token: owner.token });
      expect(failures.status, failures.raw).toBe(200);
      expect(failures.body.data).toEqual([{ error_code: 'undeliverable', count: 1, kind: 'failed' }]);
      const ofCampaign = await call(
        t.app,
        'GET',
        `/api/messages/failures?campaign_id=${broadcast.body.data.campaign_id}&since=2020-01-01`,
        { token: owner.token },
      );
      expect(ofCampaign.body.data).toEqual([{ error_code: 'undeliverable', count: 1, kind: 'failed' }]);
      const old = await call(t.app, 'GET', '/api/messages/failures?until=2020-01-01', { token: owner.token });
      expect(old.body.data).toEqual([]);
      expectError(
        await call(t.app, 'GET', '/api/messages/failures?since=yesterday', { token: owner.token }),
        422,
        'validation_error',
      );
    });

    it('POST /api/templates/render answers the text the service would send, its SMS parts and credits; {{x|fallback}}', async () => {
      const owner = await register(t.app);
      const id = (
        await call(t.app, 'POST', '/api/voters', {
          token: owner.token,
          body: { name: 'Meena Kumari', phone: uniquePhone(), ward: '12' },
        })
      ).body.data.id as number;
      const template = await call(t.app, 'POST', '/api/templates', {
        token: owner.token,
        body: {
          name: 'Hello',
          channel: 'sms',
          body: 'Namaste {{first_name|friend}}, ward {{ward}} meets at 5.',
        },
      });
      expect(template.status, template.raw).toBe(201);
      const rendered = await call(t.app, 'POST', '/api/templates/render', {
        token: owner.token,
        body: { template_id: template.body.data.id, voter_id: id },
      });
      expect(rendered.status, rendered.raw).toBe(200);
      expect(rendered.body.data).toEqual({
        channel: 'sms',
        text: 'Namaste Meena, ward 12 meets at 5.',
        sms_parts: 1,
        encoding: 'gsm7',
        credits: 1,
      });
      const fallback = await call(t.app, 'POST', '/api/templates/render', {
        token: owner.token,
        body: { body: 'नमस्ते {{first_name|मित्र}}' },
      });
      expect(fallback.body.data).toMatchObject({ text: 'नमस्ते मित्र', encoding: 'ucs2', credits: 1 });
      expectError(
        await call(t.app, 'POST', '/api/templates/render', {
          token: owner.token,
          body: { body: 'Hi {{caste}}' },
        }),
        422,
        'validation_error',
      );
      expectError(
        await call(t.app, 'POST', '/api/templates/render', { token: owner.token, body: {} }),
        422,
        'validation_error',
      );
    });

    it('managers list the team (id, name, role, active, coverage) to assign conversations; only politicians change it', async () => {
      const owner = await register(t.app);
      const manager = await addMember(t.app, owner, 'manager');
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const list = await call(t.app, 'GET', '/api/users', { token: manager.token });
      expect(list.status, list.raw).toBe(200);
      expect(list.body.data.total).toBe(3);
      for (const member of list.body.data.data)
        expect(Object.keys(member).sort()).toEqual(['active', 'coverage', 'id', 'name', 'role']);
      const full = await call(t.app, 'GET', '/api/users', { token: owner.token });
      expect(full.body.data.data[0].email).toBeTruthy();
      expectError(
        await call(t.app, 'PATCH', `/api/users/${volunteer.user.id}`, {
          token: manager.token,
          body: { role: 'manager' },
        }),
        403,
        'forbidden',
      );
      expectError(await call(t.app, 'GET', '/api/users', { token: volunteer.token }), 403, 'forbidden');
    });
  });
}
