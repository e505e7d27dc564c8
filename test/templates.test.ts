import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { renderTemplate, unknownVariables } from '../src/modules/sending/render.ts';
import {
  type Account,
  addMember,
  buildTestApp,
  call,
  dialects,
  expectError,
  register,
  type TestApp,
  uniquePhone,
} from './helpers.ts';
import { insertVoters, isolatedDatabase, until } from './messaging-helpers.ts';

/** The UTC time of day `hours` from now, as HH:MM. */
function hourMinute(hours: number): string {
  return new Date(Date.now() + hours * 3_600_000).toISOString().slice(11, 16);
}

const silent = pino({ level: 'silent' });

describe('template rendering', () => {
  it('renders the five variables from a voter, empty without one; finds unknown ones', () => {
    const voter = { name: 'Asha  Rao', constituency: 'Varanasi', booth: '12', ward: '3' };
    expect(
      renderTemplate(
        'Namaste {{first_name}} ({{ name }}), {{constituency}} booth {{booth}} ward {{ward}}',
        voter,
      ),
    ).toBe('Namaste Asha (Asha  Rao), Varanasi booth 12 ward 3');
    expect(renderTemplate('Namaste {{first_name}}!', undefined)).toBe('Namaste !');
    expect(unknownVariables('{{name}} {{phone}} {{ x }} {{phone}} {{}}')).toEqual(['phone', 'x', '']);
  });
});

for (const dialect of dialects) {
  describe(`templates (${dialect})`, () => {
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

    const create = async (owner: Account, body: Record<string, unknown>) => {
      const res = await call(t.app, 'POST', '/api/templates', { token: owner.token, body });
      return res;
    };
    const credits = async (owner: Account) =>
      (await call(t.app, 'GET', '/api/user', { token: owner.token })).body.data.credits;

    it('creates, reads, lists, changes and deletes; refuses unknown variables, other roles and workspaces', async () => {
      const owner = await register(t.app);
      const res = await create(owner, {
        name: 'Booth reminder',
        channel: 'sms',
        body: 'Namaste {{first_name}}, your booth is {{booth}}',
        dlt_template_id: '1107160000000012345',
        sender_id: 'NETAJI',
      });
      expect(res.status).toBe(201);
      expect(res.body.data).toMatchObject({
        name: 'Booth reminder',
        channel: 'sms',
        language: 'en',
        category: 'promotional',
        dlt_template_id: '1107160000000012345',
        sender_id: 'NETAJI',
        subject: null,
      });
      const id = res.body.data.id as string;
      expect(id).toMatch(/^tpl_\d+$/);
      expect((await call(t.app, 'GET', `/api/templates/${id}`, { token: owner.token })).body.data).toEqual(
        res.body.data,
      );
      const patched = await call(t.app, 'PATCH', `/api/templates/${id}`, {
        token: owner.token,
        body: { category: 'service', language: 'hi' },
      });
      expect(patched.body.data).toMatchObject({
        category: 'service',
        language: 'hi',
        name: 'Booth reminder',
      });
      expect(
        (await call(t.app, 'GET', '/api/templates?channel=sms', { token: owner.token })).body.data.total,
      ).toBe(1);
      expect(
        (await call(t.app, 'GET', '/api/templates?channel=email', { token: owner.token })).body.data.total,
      ).toBe(0);

      const bad = await create(owner, { name: 'X', channel: 'sms', body: 'Hi {{phone}} {{name}}' });
      expectError(bad, 422, 'validation_error');
      expect(bad.body.details.body[0]).toMatch(/\{\{phone\}\}/);
      expectError(
        await call(t.app, 'PATCH', `/api/templates/${id}`, {
          token: owner.token,
          body: { body: '{{voter_id}}' },
        }),
        422,
        'validation_error',
      );
      expectError(
        await create(owner, { name: 'X', channel: 'sms', body: 'x', category: 'bulk' }),
        422,
        'validation_error',
      );
      const stranger = await register(t.app);
      expectError(
        await call(t.app, 'GET', `/api/templates/${id}`, { token: stranger.token }),
        404,
        'not_found',
      );
      expectError(
        await call(t.app, 'DELETE', `/api/templates/${id}`, { token: stranger.token }),
        404,
        'not_found',
      );
      const volunteer = await addMember(t.app, owner, 'volunteer');
      expectError(await call(t.app, 'GET', '/api/templates', { token: volunteer.token }), 403, 'forbidden');
      expect((await call(t.app, 'DELETE', `/api/templates/${id}`, { token: owner.token })).status).toBe(200);
      expectError(await call(t.app, 'GET', `/api/templates/${id}`, { token: owner.token }), 404, 'not_found');
    });

    it('a send with a template renders it for the voter, counting credits on the rendered text', async () => {
      const owner = await register(t.app);
      const ws = owner.user.workspace_id;
      const phone = uniquePhone();
      await insertVoters(t, ws, 1, () => ({ phone, constituency: 'Varanasi' }));
      await t.db.kysely
        .updateTable('voters')
        .set({ name: 'सीता देवी', booth: '12' })
        .where('phone', '=', phone)
        .execute();
      // Rendered: 79 characters with Devanagari, so UCS-2: two segments of 67.
      const body = `नमस्ते {{first_name}}, ${'क'.repeat(50)} बूथ {{booth}} {{constituency}}`;
      const tpl = (await create(owner, { name: 'Hindi', channel: 'sms', body })).body.data.id as string;
      const res = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: phone, template_id: tpl },
      });
      expect(res.status).toBe(201);
      const sent = t.providers.sms.sent.find((m) => m.to === phone)!;
      expect(sent.body).toBe(`नमस्ते सीता, ${'क'.repeat(50)} बूथ 12 Varanasi`);
      expect((await credits(owner)).sms_credits).toBe(98);
      // No message and no template: 422 on message; a template of another channel or workspace: 422 on template_id.
      const none = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: phone },
      });
      expectError(none, 422, 'validation_error');
      expect(Object.keys(none.body.details)).toEqual(['message']);
      const wrong = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'whatsapp', to: phone, template_id: tpl },
      });
      expectError(wrong, 422, 'validation_error');
      expect(Object.keys(wrong.body.details)).toEqual(['template_id']);
      // Both a message and a template: which text would go out? 422 on message, for a send and a broadcast.
      for (const url of ['/api/messages/send', '/api/messages/broadcast']) {
        const both = await call(t.app, 'POST', url, {
          token: owner.token,
          body: {
            channel: 'sms',
            ...(url.endsWith('send') ? { to: phone } : { recipients: [phone] }),
            template_id: tpl,
            message: 'Hello',
          },
        });
        expectError(both, 422, 'validation_error');
        expect(Object.keys(both.body.details)).toEqual(['message']);
      }
      const stranger = await register(t.app);
      expectError(
        await call(t.app, 'POST', '/api/messages/send', {
          token: stranger.token,
          body: { channel: 'sms', to: phone, template_id: tpl },
        }),
        422,
        'validation_error',
      );
      // Any other template_id is a WhatsApp provider template, passed on with the message.
      const wa = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'whatsapp', to: phone, template_id: 'rally_invite', message: 'Rally' },
      });
      expect(wa.status).toBe(201);
      expect(t.providers.whatsapp.sent.find((m) => m.to === phone)).toMatchObject({
        templateId: 'rally_invite',
        body: 'Rally',
      });
    });

    it('a broadcast renders per recipient (non-voters empty) and trues up the credits to the rendered text', async () => {
      const owner = await register(t.app);
      const ws = owner.user.workspace_id;
      const phones = [uniquePhone(), uniquePhone()];
      await insertVoters(t, ws, 2, (i) => ({ phone: phones[i]!, constituency: ['North', 'South'][i] }));
      await t.db.kysely
        .updateTable('voters')
        .set({ name: 'Ramachandran Venkataraman Subramaniam' })
        .where('phone', '=', phones[0]!)
        .execute();
      const stranger = uniquePhone();
      // The raw body is 1 segment; one recipient's rendering takes 2 (GSM-7 over 160).
      const body = `Hi {{name}} of {{constituency}}. ${'x'.repeat(120)}`;
      const tpl = (await create(owner, { name: 'Long', channel: 'sms', body })).body.data.id as string;
      const res = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', template_id: tpl, recipients: [...phones, stranger] },
      });
      expect(res.status).toBe(202);
      const id = res.body.data.campaign_id as string;
      await until(async () => {
        await worker.drain();
        return (
          (await call(t.app, 'GET', `/api/campaigns/${id}`, { token: owner.token })).body.data.status ===
          'completed'
        );
      }, 'the broadcast to complete');
      const bodies = new Map(
        t.providers.sms.sent.filter((m) => [...phones, stranger].includes(m.to)).map((m) => [m.to, m.body]),
      );
      expect(bodies.get(phones[0]!)).toBe(
        `Hi Ramachandran Venkataraman Subramaniam of North. ${'x'.repeat(120)}`,
      );
      expect(bodies.get(phones[1]!)).toBe(`Hi Voter 1 of South. ${'x'.repeat(120)}`);
      expect(bodies.get(stranger)).toBe(`Hi  of . ${'x'.repeat(120)}`);
      const rows = await t.db.kysely
        .selectFrom('messages')
        .select(['to', 'cost', 'body'])
        .where('campaign_id', '=', Number(id.slice(5)))
        .execute();
      expect(new Map(rows.map((r) => [r.to, r.cost]))).toEqual(
        new Map([
          [phones[0], 2],
          [phones[1], 1],
          [stranger, 1],
        ]),
      );
      expect((await credits(owner)).sms_credits).toBe(96);
    });

    it('service and transactional templates are not held by quiet hours', async () => {
      const held = await buildTestApp(dialect, {
        ...database.env,
        SANDBOX_DELIVERY_DELAY_MS: '0',
        // A window around now (UTC): '00:00-23:59' held nothing in the minute before midnight.
        QUIET_HOURS: `${hourMinute(-1)}-${hourMinute(3)}`,
        QUIET_HOURS_TZ: 'UTC',
      });
      try {
        const w = new DeliveryWorker({
          db: held.db,
          config: held.config,
          providers: held.providers,
          log: silent,
        });
        const owner = await register(held.app);
        const make = async (category: string) =>
          (
            await call(held.app, 'POST', '/api/templates', {
              token: owner.token,
              body: { name: category, channel: 'sms', body: 'Your booth is open', category },
            })
          ).body.data.id as string;
        const statusOf = async (campaign: string) =>
          (
            await held.db.kysely
              .selectFrom('messages')
              .select('status')
              .where('campaign_id', '=', Number(campaign.slice(5)))
              .executeTakeFirstOrThrow()
          ).status;
        const ids: Record<string, string> = {};
        for (const category of ['promotional', 'service', 'transactional']) {
          const res = await call(held.app, 'POST', '/api/messages/broadcast', {
            token: owner.token,
            body: { channel: 'sms', template_id: await make(category), recipients: [uniquePhone()] },
          });
          ids[category] = res.body.data.campaign_id as string;
        }
        await w.drain();
        expect(await statusOf(ids.promotional!)).toBe('queued');
        expect(await statusOf(ids.service!)).toBe('delivered');
        expect(await statusOf(ids.transactional!)).toBe('delivered');
      } finally {
        await held.close();
      }
    });

    it('DLT_ENFORCE: an SMS needs a tpl_ template with a DLT template id and a sender id, and the provider gets both', async () => {
      const dlt = await buildTestApp(dialect, { ...database.env, DLT_ENFORCE: 'true' });
      try {
        const owner = await register(dlt.app);
        const phone = uniquePhone();
        const send = (body: Record<string, unknown>) =>
          call(dlt.app, 'POST', '/api/messages/send', {
            token: owner.token,
            body: { channel: 'sms', to: phone, ...body },
          });
        const plain = await send({ message: 'Hello' });
        expectError(plain, 422, 'validation_error');
        expect(Object.keys(plain.body.details)).toEqual(['template_id']);
        const bare = (
          await call(dlt.app, 'POST', '/api/templates', {
            token: owner.token,
            body: { name: 'B', channel: 'sms', body: 'Hello' },
          })
        ).body.data.id;
        const unregistered = await send({ template_id: bare });
        expectError(unregistered, 422, 'validation_error');
        expect(unregistered.body.details.template_id).toEqual([
          `is ${bare}, which has no dlt_template_id and no sender_id: DLT_ENFORCE needs a template registered with both.`,
        ]);
        expect(plain.body.details.template_id[0]).toMatch(/^is required for SMS while DLT_ENFORCE is on/);
        const registered = (
          await call(dlt.app, 'POST', '/api/templates', {
            token: owner.token,
            body: {
              name: 'R',
              channel: 'sms',
              body: 'Hello {{name}}',
              dlt_template_id: '1107160000000012345',
              sender_id: 'NETAJI',
            },
          })
        ).body.data.id;
        expect((await send({ template_id: registered })).status).toBe(201);
        expect(dlt.providers.sms.sent.find((m) => m.to === phone)).toMatchObject({
          body: 'Hello ',
          dltTemplateId: '1107160000000012345',
          senderId: 'NETAJI',
        });
        // Other channels are not ruled by DLT.
        expect(
          (
            await call(dlt.app, 'POST', '/api/messages/send', {
              token: owner.token,
              body: { channel: 'whatsapp', to: phone, message: 'Hi' },
            })
          ).status,
        ).toBe(201);
      } finally {
        await dlt.close();
      }
    });
  });
}
