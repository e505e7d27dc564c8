import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import {
  addMember,
  buildTestApp,
  call,
  dialects,
  expectError,
  importCsv,
  register,
  uniquePhone,
  type Account,
  type TestApp,
} from './helpers.ts';

for (const dialect of dialects) {
  describe(`conversations (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect, { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
    });
    afterAll(() => t?.close());

    const inbound = (owner: Account, from: string, body: string, channel = 'sms') =>
      call(t.app, 'POST', '/api/inbound', { token: owner.token, body: { channel, from, body } });
    const list = async (token: string, query = '') =>
      (await call(t.app, 'GET', `/api/conversations${query}`, { token })).body.data;
    const thread = async (token: string, id: string) =>
      (await call(t.app, 'GET', `/api/conversations/${id}/messages`, { token })).body.data.data;
    const cover = (owner: Account, user: Account, coverage: Record<string, string[]>) =>
      call(t.app, 'PATCH', `/api/users/${user.user.id}`, { token: owner.token, body: { coverage } });

    it('a reply opens a conversation for its voter, assigned by coverage to the least-loaded volunteer, with the message it answered', async () => {
      const owner = await register(t.app);
      await call(t.app, 'POST', '/api/webhooks', {
        token: owner.token,
        body: { url: 'http://127.0.0.1:9/hook', events: ['conversation.created', 'conversation.assigned'] },
      });
      const [asha, ravi] = [uniquePhone(), uniquePhone()];
      await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Asha Devi', phone: asha, constituency: 'Varanasi', ward: 'Ward 12', booth: '41' },
      });
      await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Ravi Kumar', phone: ravi, constituency: 'Varanasi', ward: 'ward  12' },
      });
      const v1 = await addMember(t.app, owner, 'volunteer');
      const v2 = await addMember(t.app, owner, 'volunteer');
      const covered = await cover(owner, v1, { wards: ['Ward 12'] });
      expect(covered.body.data.coverage).toEqual({ wards: ['Ward 12'], booths: [], constituencies: [] });
      await cover(owner, v2, { constituencies: ['VARANASI'] });

      // A single send before, then a broadcast: the reply answers the broadcast.
      const single = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: asha, message: 'Welcome to the campaign' },
      });
      const bulk = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Meeting on Sunday', recipients: [asha, ravi] },
      });
      expect(bulk.status).toBe(202);
      await new DeliveryWorker({
        db: t.db,
        config: t.config,
        providers: t.providers,
        log: pino({ level: 'silent' }),
      }).drain();
      expect((await inbound(owner, asha, 'The hand pump in ward 12 is broken')).status).toBe(201);
      expect((await inbound(owner, ravi, 'Where is the meeting?')).status).toBe(201);

      const all = await list(owner.token);
      expect(all.total).toBe(2);
      const first = all.data.find((c: { address: string }) => c.address === asha);
      const second = all.data.find((c: { address: string }) => c.address === ravi);
      // Both volunteers cover them; each goes to the one with fewer open conversations.
      expect(first).toMatchObject({
        channel: 'sms',
        voter_name: 'Asha Devi',
        status: 'open',
        unread_count: 1,
        last_message_preview: 'The hand pump in ward 12 is broken',
        grievance_id: null,
      });
      expect(new Set([first.assigned_to, second.assigned_to])).toEqual(new Set([v1.user.id, v2.user.id]));
      const mine = first.assigned_to === v1.user.id ? v1 : v2;
      const theirs = mine === v1 ? v2 : v1;

      // The thread: the single send, the broadcast message answered, the reply.
      const messages = await thread(mine.token, first.id);
      expect(messages.map((m: { direction: string; body: string }) => [m.direction, m.body])).toEqual([
        ['outbound', 'Welcome to the campaign'],
        ['outbound', 'Meeting on Sunday'],
        ['inbound', 'The hand pump in ward 12 is broken'],
      ]);
      expect(messages[0].sent_by).toBe(null);
      expect(single.status).toBe(201);
      // Read by its assignee: nothing unread.
      expect(
        (await call(t.app, 'GET', `/api/conversations/${first.id}`, { token: mine.token })).body.data
          .unread_count,
      ).toBe(0);

      // A volunteer sees only their own: another's is 404 on every route.
      expect((await list(theirs.token)).data.map((c: { id: string }) => c.id)).toEqual([second.id]);
      for (const [method, path, body] of [
        ['GET', `/api/conversations/${first.id}`, undefined],
        ['GET', `/api/conversations/${first.id}/messages`, undefined],
        ['POST', `/api/conversations/${first.id}/reply`, { message: 'hi' }],
        ['PATCH', `/api/conversations/${first.id}`, { status: 'closed' }],
        ['POST', `/api/conversations/${first.id}/grievance`, {}],
      ] as const) {
        expectError(await call(t.app, method, path, { token: theirs.token, body }), 404, 'not_found');
      }
      expectError(
        await call(t.app, 'PATCH', `/api/conversations/${first.id}`, {
          token: mine.token,
          body: { assigned_to: theirs.user.id },
        }),
        403,
        'forbidden',
      );

      // The assignee replies: a send that costs a credit and joins the thread.
      const before = (await call(t.app, 'GET', '/api/user', { token: owner.token })).body.data.credits
        .sms_credits;
      const reply = await call(t.app, 'POST', `/api/conversations/${first.id}/reply`, {
        token: mine.token,
        body: { message: 'We have told the ward office.' },
      });
      expect(reply.status).toBe(201);
      expect(
        (await call(t.app, 'GET', '/api/user', { token: owner.token })).body.data.credits.sms_credits,
      ).toBe(before - 1);
      const after = await thread(mine.token, first.id);
      expect(after.at(-1)).toMatchObject({
        direction: 'outbound',
        body: 'We have told the ward office.',
        sent_by: mine.user.id,
      });

      // A grievance from the conversation, linked; a second while it is open is 409.
      const grievance = await call(t.app, 'POST', `/api/conversations/${first.id}/grievance`, {
        token: mine.token,
        body: { category: 'water', priority: 'high' },
      });
      expect(grievance.status).toBe(201);
      expect(grievance.body.data).toMatchObject({
        description: 'The hand pump in ward 12 is broken',
        category: 'water',
      });
      expect(
        (await call(t.app, 'GET', `/api/conversations/${first.id}`, { token: mine.token })).body.data
          .grievance_id,
      ).toBe(grievance.body.data.id);
      expectError(
        await call(t.app, 'POST', `/api/conversations/${first.id}/grievance`, {
          token: mine.token,
          body: {},
        }),
        409,
        'conflict',
      );

      // Closed, then reopened by the next inbound message.
      await call(t.app, 'PATCH', `/api/conversations/${first.id}`, {
        token: mine.token,
        body: { status: 'closed' },
      });
      expect((await list(owner.token, '?status=closed')).data.map((c: { id: string }) => c.id)).toEqual([
        first.id,
      ]);
      await inbound(owner, asha, 'Thank you');
      expect(
        (await call(t.app, 'GET', `/api/conversations/${first.id}`, { token: owner.token })).body.data,
      ).toMatchObject({
        status: 'open',
        unread_count: 1,
      });

      // STOP shows in the thread, and a reply is refused while the contact is opted out.
      await inbound(owner, asha, 'STOP');
      expect((await thread(mine.token, first.id)).at(-1)).toMatchObject({
        direction: 'inbound',
        body: 'STOP',
        keyword: 'stop',
      });
      const refused = await call(t.app, 'POST', `/api/conversations/${first.id}/reply`, {
        token: mine.token,
        body: { message: 'Sorry' },
      });
      expectError(refused, 422, 'validation_error');
      expect(Object.keys(refused.body.details)).toEqual(['message']);

      // Assignment by a manager; an inactive member is refused; deactivating unassigns.
      expectError(
        await call(t.app, 'PATCH', `/api/conversations/${first.id}`, {
          token: owner.token,
          body: { assigned_to: 999_999_999 },
        }),
        422,
        'validation_error',
      );
      await call(t.app, 'PATCH', `/api/users/${mine.user.id}`, {
        token: owner.token,
        body: { active: false },
      });
      expect(
        (await call(t.app, 'GET', `/api/conversations/${first.id}`, { token: owner.token })).body.data
          .assigned_to,
      ).toBe(null);
      expect((await list(owner.token, '?assigned_to=none')).data.map((c: { id: string }) => c.id)).toContain(
        first.id,
      );
      expect((await list(owner.token, '?search=ravi')).data.map((c: { id: string }) => c.id)).toEqual([
        second.id,
      ]);
      expect((await list(owner.token, '?ward=WARD%2012')).total).toBe(2);
      const ids = async (query: string) =>
        (await list(owner.token, query)).data.map((c: { id: string }) => c.id);
      expect(await ids('?booth=41')).toEqual([first.id]);
      expect(await ids('?constituency=varanasi&search=asha')).toEqual([first.id]);
      expect(await ids(`?search=${encodeURIComponent(ravi.slice(-6))}`)).toEqual([second.id]);
      expect(await ids('?ward=13')).toEqual([]);

      // The inbox follows the voter: an edit moves the conversation between filters and renames it; a deleted
      // voter unlinks it (nothing of them is left on it).
      const voterId = first.voter_id as number;
      const edited = await call(t.app, 'PUT', `/api/voters/${voterId}`, {
        token: owner.token,
        body: { name: 'Asha Devi Sharma', ward: 'Ward 13', booth: '42', constituency: 'Chandauli' },
      });
      expect(edited.status).toBe(200);
      expect(await ids('?ward=ward%2013&booth=42&constituency=CHANDAULI')).toEqual([first.id]);
      expect(await ids('?search=sharma')).toEqual([first.id]);
      expect(await ids('?booth=41')).toEqual([]);
      expect((await list(owner.token, '?search=sharma')).data[0].voter_name).toBe('Asha Devi Sharma');
      // An import's merge too (the bulk path of each database).
      const merged = await importCsv(
        t.app,
        owner.token,
        `name,phone,ward\nAsha Devi Sharma,${asha},Ward 14\n`,
      );
      expect(merged.body.data).toMatchObject({ imported: 0, updated: 1, failed: 0 });
      expect(await ids('?ward=WARD%2014')).toEqual([first.id]);
      expect(await ids('?ward=ward%2013')).toEqual([]);
      expect((await call(t.app, 'DELETE', `/api/voters/${voterId}`, { token: owner.token })).status).toBe(
        200,
      );
      expect(
        (await call(t.app, 'GET', `/api/conversations/${first.id}`, { token: owner.token })).body.data,
      ).toMatchObject({ voter_id: null, voter_name: null });
      expect(await ids('?ward=ward%2014')).toEqual([]);
      expect(await ids('?search=sharma')).toEqual([]);

      const events = await t.db.kysely
        .selectFrom('webhook_events')
        .select('type')
        .where('workspace_id', '=', owner.user.workspace_id)
        .execute();
      const types = events.map((e) => e.type);
      expect(types.filter((x) => x === 'conversation.created')).toHaveLength(2);
      expect(types.filter((x) => x === 'conversation.assigned')).toHaveLength(2);
      const audit = await call(t.app, 'GET', '/api/audit-log?per_page=100', { token: owner.token });
      expect(audit.body.data.data.map((e: { action: string }) => e.action)).toContain('conversation.closed');
    });

    it("WhatsApp: free text only within 24 hours of the contact's last message; a template after", async () => {
      const owner = await register(t.app);
      const from = uniquePhone();
      await inbound(owner, from, 'Hello', 'whatsapp');
      const conversation = (await list(owner.token)).data[0];
      expect(
        (
          await call(t.app, 'POST', `/api/conversations/${conversation.id}/reply`, {
            token: owner.token,
            body: { message: 'Hi!' },
          })
        ).status,
      ).toBe(201);
      await t.db.kysely
        .updateTable('conversations')
        .set({ last_inbound_at: new Date(Date.now() - 25 * 3600 * 1000).toISOString() })
        .where('id', '=', Number(conversation.id.slice(5)))
        .execute();
      const late = await call(t.app, 'POST', `/api/conversations/${conversation.id}/reply`, {
        token: owner.token,
        body: { message: 'Still there?' },
      });
      expectError(late, 422, 'validation_error');
      expect(late.body.details.message[0]).toContain('24 hours');
      const tpl = await call(t.app, 'POST', '/api/templates', {
        token: owner.token,
        body: {
          name: 'Follow up',
          channel: 'whatsapp',
          body: 'Namaste {{name}}, following up.',
          category: 'service',
        },
      });
      const templated = await call(t.app, 'POST', `/api/conversations/${conversation.id}/reply`, {
        token: owner.token,
        body: { template_id: tpl.body.data.id, variables: { name: 'Didi' } },
      });
      expect(templated.status).toBe(201);
      expect((await thread(owner.token, conversation.id)).at(-1).body).toBe('Namaste Didi, following up.');
    });

    it('quick replies: every member reads them; politicians and managers write them', async () => {
      const owner = await register(t.app);
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const created = await call(t.app, 'POST', '/api/quick-replies', {
        token: owner.token,
        body: { title: 'Thanks', body: 'Thank you for writing; we will get back to you.', language: 'en' },
      });
      expect(created.status).toBe(201);
      expect(created.body.data.id).toMatch(/^qr_\d+$/);
      expect(
        (await call(t.app, 'GET', '/api/quick-replies', { token: volunteer.token })).body.data.data,
      ).toHaveLength(1);
      expectError(
        await call(t.app, 'POST', '/api/quick-replies', {
          token: volunteer.token,
          body: { title: 'x', body: 'y' },
        }),
        403,
        'forbidden',
      );
      expect(
        (
          await call(t.app, 'PATCH', `/api/quick-replies/${created.body.data.id}`, {
            token: owner.token,
            body: { title: 'Thanks!' },
          })
        ).body.data.title,
      ).toBe('Thanks!');
      expect(
        (await call(t.app, 'DELETE', `/api/quick-replies/${created.body.data.id}`, { token: owner.token }))
          .status,
      ).toBe(200);
      expect(
        (await call(t.app, 'GET', '/api/quick-replies', { token: volunteer.token })).body.data.total,
      ).toBe(0);
    });
  });
}
