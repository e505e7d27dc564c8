/**
 * Volunteers see their part of the roll (the contract's fourth part, "An office's first week"): a volunteer
 * lists, reads, creates and updates only the voters of their coverage, those they added, and the contacts of
 * conversations assigned to them (any other voter is 404); grievances likewise: those they opened, those
 * assigned to them, and those of voters in their part. Managers and politicians see the whole roll.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

for (const dialect of dialects) {
  describe(`a volunteer's part of the roll (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
    });
    afterAll(() => t?.close());

    const voter = async (owner: Account, body: Record<string, unknown>) => {
      const res = await call(t.app, 'POST', '/api/voters', { token: owner.token, body });
      expect(res.status, res.raw).toBe(201);
      return res.body.data.id as number;
    };
    const listed = async (token: string, query = '') => {
      const res = await call(t.app, 'GET', `/api/voters?per_page=100${query}`, { token });
      expect(res.status, res.raw).toBe(200);
      return {
        names: res.body.data.data.map((v: { name: string }) => v.name).sort(),
        total: res.body.data.total,
      };
    };

    it('lists, reads and updates only the voters of their coverage, those they added and their conversations’ contacts', async () => {
      const owner = await register(t.app);
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const manager = await addMember(t.app, owner, 'manager');
      await call(t.app, 'PATCH', `/api/users/${volunteer.user.id}`, {
        token: owner.token,
        body: { coverage: { wards: ['Ward 5'], booths: ['B-17'] } },
      });
      await voter(owner, { name: 'Covered Kumar', phone: uniquePhone(), ward: 'ward 5' });
      await voter(owner, { name: 'Booth Bala', phone: uniquePhone(), ward: '8', booth: 'B-17' });
      const outside = await voter(owner, { name: 'Outside Omkar', phone: uniquePhone(), ward: '6' });
      const contactPhone = uniquePhone();
      await voter(owner, { name: 'Contact Chitra', phone: contactPhone, ward: '7' });

      expect(await listed(volunteer.token)).toEqual({ names: ['Booth Bala', 'Covered Kumar'], total: 2 });
      expect((await listed(volunteer.token, '&search=Outside')).names).toEqual([]);
      expect((await listed(volunteer.token, '&ward=6')).total).toBe(0);
      expectError(
        await call(t.app, 'GET', `/api/voters/${outside}`, { token: volunteer.token }),
        404,
        'not_found',
      );
      expectError(
        await call(t.app, 'PUT', `/api/voters/${outside}`, { token: volunteer.token, body: { ward: '5' } }),
        404,
        'not_found',
      );
      // What they add is theirs.
      const added = await voter(volunteer, { name: 'Added Anil', phone: uniquePhone(), ward: '9' });
      expect((await call(t.app, 'GET', `/api/voters/${added}`, { token: volunteer.token })).status).toBe(200);
      // A conversation assigned to them brings its contact in.
      await call(t.app, 'POST', '/api/inbound', {
        token: owner.token,
        body: { channel: 'sms', from: contactPhone, body: 'Hello' },
      });
      const conversation = (await call(t.app, 'GET', '/api/conversations', { token: owner.token })).body.data
        .data[0] as { id: string };
      await call(t.app, 'PATCH', `/api/conversations/${conversation.id}`, {
        token: owner.token,
        body: { assigned_to: volunteer.user.id },
      });
      expect((await listed(volunteer.token)).names).toEqual([
        'Added Anil',
        'Booth Bala',
        'Contact Chitra',
        'Covered Kumar',
      ]);
      // The manager and the politician see the whole roll.
      expect((await listed(manager.token)).total).toBe(5);
      expect((await listed(owner.token)).total).toBe(5);
    });

    it('a volunteer with no coverage sees only what they added', async () => {
      const owner = await register(t.app);
      const volunteer = await addMember(t.app, owner, 'volunteer');
      await voter(owner, { name: 'Someone Else', phone: uniquePhone(), ward: '1' });
      expect(await listed(volunteer.token)).toEqual({ names: [], total: 0 });
      await voter(volunteer, { name: 'Mine', phone: uniquePhone() });
      expect(await listed(volunteer.token)).toEqual({ names: ['Mine'], total: 1 });
    });

    it('grievances: those they opened, those assigned to them, and those of voters in their part; others are 404', async () => {
      const owner = await register(t.app);
      const volunteer = await addMember(t.app, owner, 'volunteer');
      await call(t.app, 'PATCH', `/api/users/${volunteer.user.id}`, {
        token: owner.token,
        body: { coverage: { wards: ['5'] } },
      });
      const covered = await voter(owner, { name: 'Covered', phone: uniquePhone(), ward: '5' });
      const outside = await voter(owner, { name: 'Outside', phone: uniquePhone(), ward: '6' });
      const grievance = async (account: Account, body: Record<string, unknown>) => {
        const res = await call(t.app, 'POST', '/api/grievances', { token: account.token, body });
        expect(res.status, res.raw).toBe(201);
        return res.body.data.id as number;
      };
      const ofCovered = await grievance(owner, { title: 'Drain in ward 5', voter_id: covered });
      const ofOutside = await grievance(owner, { title: 'Road in ward 6', voter_id: outside });
      const assigned = await grievance(owner, {
        title: 'Assigned',
        voter_id: outside,
        assigned_to: volunteer.user.id,
      });
      const opened = await grievance(volunteer, { title: 'Opened by the volunteer' });
      const list = await call(t.app, 'GET', '/api/grievances?per_page=100', { token: volunteer.token });
      expect(list.body.data.data.map((g: { id: number }) => g.id).sort()).toEqual(
        [ofCovered, assigned, opened].sort(),
      );
      expectError(
        await call(t.app, 'GET', `/api/grievances/${ofOutside}`, { token: volunteer.token }),
        404,
        'not_found',
      );
      expectError(
        await call(t.app, 'PATCH', `/api/grievances/${ofOutside}`, {
          token: volunteer.token,
          body: { status: 'in_progress' },
        }),
        404,
        'not_found',
      );
      expect(
        (await call(t.app, 'GET', `/api/grievances/${ofCovered}`, { token: volunteer.token })).status,
      ).toBe(200);
      const all = await call(t.app, 'GET', '/api/grievances?per_page=100', { token: owner.token });
      expect(all.body.data.total).toBe(4);
    });
  });
}
