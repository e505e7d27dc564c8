/**
 * Conversations in an office's second week (contract, fifth part): a complaint from a number not on the roll is
 * linked to the voter's EPIC record (`POST /api/conversations/{id}/voter`), whose empty phone takes the contact's
 * (audited); a STOP shows in the thread as a consent event, and the conversation says the contact is opted out.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
  describe(`linking a conversation to a voter, and opt-outs in the thread (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
    });
    afterAll(() => t.close());

    it('links a number not on the roll to the voter found by EPIC, giving the voter that phone', async () => {
      const owner = await register(t.app);
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const other = await addMember(t.app, owner, 'volunteer');
      await call(t.app, 'PATCH', `/api/users/${volunteer.user.id}`, {
        token: owner.token,
        body: { coverage: { wards: ['Ward 12'] } },
      });
      const api = (who: { token: string }, method: string, url: string, body?: unknown) =>
        call(t.app, method as 'GET', url, { token: who.token, ...(body !== undefined ? { body } : {}) });
      // The roll's voter, without a phone; and one outside the volunteer's wards.
      const epic = `UP/74/381/${String(Date.now()).slice(-6)}`;
      await t.db.kysely
        .insertInto('voters')
        .values(
          [
            ['Kamla Devi', epic, 'Ward 12'],
            ['Far Away', null, 'Ward 40'],
          ].map(([name, epicNumber, ward]) => ({
            workspace_id: owner.user.workspace_id,
            name: name!,
            name_key: name!.toLowerCase(),
            phone: null,
            email: null,
            constituency: null,
            constituency_key: null,
            booth: null,
            booth_key: null,
            ward: ward!,
            ward_key: ward!.toLowerCase(),
            address: null,
            epic_number: epicNumber,
            created_at: new Date().toISOString(),
            updated_at: new Date().toISOString(),
          })),
        )
        .execute();
      const kamla = (await api(owner, 'GET', `/api/voters?epic_number=${encodeURIComponent(epic)}`)).body.data
        .data[0];
      const far = (await api(owner, 'GET', '/api/voters?ward=Ward%2040')).body.data.data[0];
      const phone = uniquePhone();
      await api(owner, 'POST', '/api/inbound', { channel: 'sms', from: phone, body: 'नाली बंद है' });
      const conversation = (await api(owner, 'GET', '/api/conversations')).body.data.data.find(
        (c: { address: string }) => c.address === phone,
      );
      expect(conversation.voter_id).toBeNull();
      await api(owner, 'PATCH', `/api/conversations/${conversation.id}`, { assigned_to: volunteer.user.id });
      const url = `/api/conversations/${conversation.id}/voter`;
      // Another volunteer cannot; the assignee cannot reach a voter outside their wards.
      expect((await api(other, 'POST', url, { voter_id: kamla.id })).status).toBe(404);
      expectError(await api(volunteer, 'POST', url, { voter_id: far.id }), 422, 'validation_error');
      expectError(await api(owner, 'POST', url, { voter_id: 999_999_999 }), 422, 'validation_error');
      const linked = await api(volunteer, 'POST', url, { voter_id: kamla.id });
      expect(linked.status, linked.raw).toBe(200);
      expect(linked.body.data).toMatchObject({ voter_id: kamla.id, voter_name: 'Kamla Devi' });
      expect((await api(owner, 'GET', `/api/voters/${kamla.id}`)).body.data.phone).toBe(phone);
      const audit = await api(owner, 'GET', '/api/audit-log?action=conversation.linked');
      expect(audit.body.data.data[0].details).toMatchObject({ voter_id: kamla.id, voter_phone_set: true });
    });

    it('a STOP shows in the thread as an opt-out, and the conversation says so', async () => {
      const owner = await register(t.app);
      const phone = uniquePhone();
      await call(t.app, 'POST', '/api/inbound', {
        token: owner.token,
        body: { channel: 'sms', from: phone, body: 'Who is this?' },
      });
      await call(t.app, 'POST', '/api/inbound', {
        token: owner.token,
        body: { channel: 'sms', from: phone, body: 'STOP' },
      });
      const conversation = (await call(t.app, 'GET', '/api/conversations', { token: owner.token })).body.data
        .data[0];
      const detail = (
        await call(t.app, 'GET', `/api/conversations/${conversation.id}`, { token: owner.token })
      ).body.data;
      expect(detail.opted_out).toBe(true);
      const thread = (
        await call(t.app, 'GET', `/api/conversations/${conversation.id}/messages`, { token: owner.token })
      ).body.data.data;
      expect(thread.at(-1)).toMatchObject({ direction: 'inbound', body: 'STOP', keyword: 'stop' });
      expectError(
        await call(t.app, 'POST', `/api/conversations/${conversation.id}/reply`, {
          token: owner.token,
          body: { message: 'Sorry' },
        }),
        422,
        'validation_error',
      );
    });
  });
}
