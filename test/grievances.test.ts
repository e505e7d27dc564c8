import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addMember,
  type Account,
  buildTestApp,
  call,
  dialects,
  expectError,
  register,
  type TestApp,
} from './helpers.ts';

const DAY = 24 * 3600_000;

async function create(t: TestApp, account: Account, body: Record<string, unknown> = {}) {
  const res = await call(t.app, 'POST', '/api/grievances', {
    token: account.token,
    body: { title: 'Street light broken', ...body },
  });
  if (res.status !== 201) throw new Error(`create grievance: ${res.status} ${res.raw}`);
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  return res.body.data as Record<string, any> & { id: number };
}

function patch(t: TestApp, account: Account, id: number, body: unknown) {
  return call(t.app, 'PATCH', `/api/grievances/${id}`, { token: account.token, body });
}

for (const dialect of dialects) {
  describe(`grievances (${dialect})`, () => {
    let t: TestApp;
    let owner: Account;
    beforeAll(async () => {
      // Endpoints in these tests are never called; private URLs are allowed so no DNS is needed.
      t = await buildTestApp(dialect, { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
      owner = await register(t.app);
    });
    afterAll(() => t.close());

    it('creates an open grievance with every field, due in 7 days at normal priority', async () => {
      const voter = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Sunita Devi', phone: `+9170${String(Date.now()).slice(-8)}` },
      });
      const res = await call(t.app, 'POST', '/api/grievances', {
        token: owner.token,
        body: {
          title: '  No water for three days ',
          description: 'Ward 7 supply line',
          category: 'Water',
          voter_id: voter.body.data.id,
          reporter_name: 'Sunita Devi',
          reporter_phone: '98765 43210',
          constituency: 'Varanasi',
          booth: 12,
          ward: '7',
          assigned_to: owner.user.id,
        },
      });
      expect(res.status).toBe(201);
      const g = res.body.data;
      expect(Object.keys(g).sort()).toEqual(
        [
          'id',
          'title',
          'description',
          'category',
          'status',
          'priority',
          'voter_id',
          'reporter_name',
          'reporter_phone',
          'constituency',
          'booth',
          'ward',
          'assigned_to',
          'resolution_note',
          'due_at',
          'created_at',
          'updated_at',
          'resolved_at',
        ].sort(),
      );
      expect(g).toMatchObject({
        title: 'No water for three days',
        status: 'open',
        priority: 'normal',
        voter_id: voter.body.data.id,
        reporter_phone: '+919876543210',
        booth: '12',
        ward: '7',
        assigned_to: owner.user.id,
        resolution_note: null,
        resolved_at: null,
      });
      expect(Date.parse(g.due_at) - Date.parse(g.created_at)).toBe(7 * DAY);
      expect(g.created_at).toMatch(/Z$/);
      const read = await call(t.app, 'GET', `/api/grievances/${g.id}`, { token: owner.token });
      expect(read.body.data).toEqual(g);
    });

    it('takes due_at from priority and recomputes it from created_at when the priority changes', async () => {
      for (const [priority, days] of [
        ['urgent', 1],
        ['high', 3],
        ['normal', 7],
        ['low', 14],
      ] as const) {
        const g = await create(t, owner, { priority });
        expect(Date.parse(g.due_at) - Date.parse(g.created_at), priority).toBe(days * DAY);
      }
      const g = await create(t, owner, { priority: 'low' });
      const res = await patch(t, owner, g.id, { priority: 'urgent' });
      expect(res.body.data.priority).toBe('urgent');
      expect(Date.parse(res.body.data.due_at) - Date.parse(g.created_at)).toBe(DAY);
      expect(res.body.data.created_at).toBe(g.created_at);
    });

    it('moves open -> in_progress -> resolved -> open -> in_progress -> resolved -> closed; closed is final', async () => {
      const g = await create(t, owner);
      const step = async (status: string) => {
        const res = await patch(t, owner, g.id, { status });
        expect(res.status, `to ${status}`).toBe(200);
        return res.body.data;
      };
      expect((await step('in_progress')).resolved_at).toBeNull();
      const resolved = await step('resolved');
      expect(resolved.resolved_at).toMatch(/Z$/);
      const reopened = await step('open');
      expect(reopened.resolved_at).toBeNull();
      await step('in_progress');
      const again = await patch(t, owner, g.id, { status: 'resolved', resolution_note: 'Line repaired' });
      expect(again.body.data).toMatchObject({ status: 'resolved', resolution_note: 'Line repaired' });
      const closed = await step('closed');
      expect(closed.resolved_at).toBe(again.body.data.resolved_at);
      for (const status of ['open', 'in_progress', 'resolved']) {
        const res = await patch(t, owner, g.id, { status });
        expectError(res, 422, 'validation_error');
        expect(res.body.details.status[0]).toMatch(/final/);
      }
      // Staying in the same status is not a move.
      expect((await patch(t, owner, g.id, { status: 'closed', category: 'Water' })).status).toBe(200);
    });

    it('refuses the moves the lifecycle does not have', async () => {
      for (const [from, to] of [
        ['open', 'resolved'],
        ['open', 'closed'],
        ['in_progress', 'open'],
        ['in_progress', 'closed'],
        ['resolved', 'in_progress'],
      ] as const) {
        const g = await create(t, owner);
        const path = { open: [], in_progress: ['in_progress'], resolved: ['in_progress', 'resolved'] }[from];
        for (const status of path) expect((await patch(t, owner, g.id, { status })).status).toBe(200);
        const res = await patch(t, owner, g.id, { status: to, title: 'changed' });
        expectError(res, 422, 'validation_error');
        expect(Object.keys(res.body.details)).toEqual(['status']);
        expect(res.body.details.status[0]).toContain(`from ${from} to ${to}`);
        const unchanged = await call(t.app, 'GET', `/api/grievances/${g.id}`, { token: owner.token });
        expect(unchanged.body.data).toMatchObject({ status: from, title: 'Street light broken' });
      }
    });

    it('filters by status, priority, category, constituency, assigned_to, overdue and search', async () => {
      const office = await register(t.app);
      const member = await addMember(t.app, office, 'volunteer');
      const a = await create(t, office, {
        title: 'Broken hand pump',
        category: 'Water',
        constituency: 'Varanasi',
        priority: 'urgent',
        assigned_to: member.user.id,
      });
      const b = await create(t, office, {
        title: 'Garbage not collected',
        description: 'Near the hand-pump 50% of days',
        category: 'Sanitation',
        constituency: 'Lucknow',
      });
      const c = await create(t, office, { title: 'Pension delayed', priority: 'low' });
      await patch(t, office, c.id, { status: 'in_progress' });
      // a is 30 days old and overdue; b is as old but resolved, so not overdue.
      const old = new Date(Date.now() - 30 * DAY).toISOString();
      await t.db.kysely
        .updateTable('grievances')
        .set({ created_at: old, due_at: new Date(Date.now() - 29 * DAY).toISOString() })
        .where('id', 'in', [a.id, b.id])
        .execute();
      await patch(t, office, b.id, { status: 'in_progress' });
      await patch(t, office, b.id, { status: 'resolved' });
      const ids = async (query: string) => {
        const res = await call(t.app, 'GET', `/api/grievances?${query}`, { token: office.token });
        expect(res.status, query).toBe(200);
        return res.body.data.data.map((g: { id: number }) => g.id);
      };
      expect(await ids('')).toEqual([c.id, b.id, a.id]);
      expect(await ids('status=open')).toEqual([a.id]);
      expect(await ids('status=in_progress')).toEqual([c.id]);
      expect(await ids('priority=urgent')).toEqual([a.id]);
      expect(await ids('priority=low')).toEqual([c.id]);
      expect(await ids('category=water')).toEqual([a.id]);
      expect(await ids('constituency=LUCKNOW')).toEqual([b.id]);
      expect(await ids(`assigned_to=${member.user.id}`)).toEqual([a.id]);
      expect(await ids('overdue=true')).toEqual([a.id]);
      expect(await ids('overdue=false')).toEqual([c.id, b.id]);
      expect(await ids('search=HAND')).toEqual([b.id, a.id]);
      expect(await ids('search=50%25')).toEqual([b.id]);
      expect(await ids('search=pump&category=Water&overdue=true')).toEqual([a.id]);
      expect(await ids('search=nothing-like-this')).toEqual([]);
      const page = await call(t.app, 'GET', '/api/grievances?per_page=2&page=2', { token: office.token });
      expect(page.body.data).toMatchObject({ current_page: 2, per_page: 2, total: 3, last_page: 2 });
    });

    it('assigns only to users, and links only voters, of the same workspace', async () => {
      const other = await register(t.app);
      const otherVoter = await call(t.app, 'POST', '/api/voters', {
        token: other.token,
        body: { name: 'Other Voter', phone: `+9171${String(Date.now()).slice(-8)}` },
      });
      const res = await call(t.app, 'POST', '/api/grievances', {
        token: owner.token,
        body: { title: 'X', assigned_to: other.user.id, voter_id: otherVoter.body.data.id },
      });
      expectError(res, 422, 'validation_error');
      expect(res.body.details).toEqual({
        assigned_to: ['must be a user of your workspace.'],
        voter_id: ['must be a voter of your workspace.'],
      });
      const g = await create(t, owner);
      expectError(await patch(t, owner, g.id, { assigned_to: other.user.id }), 422, 'validation_error');
      expectError(await patch(t, owner, g.id, { assigned_to: 999_999_999 }), 422, 'validation_error');
      const member = await addMember(t.app, owner, 'manager');
      expect((await patch(t, owner, g.id, { assigned_to: member.user.id })).body.data.assigned_to).toBe(
        member.user.id,
      );
      expect((await patch(t, owner, g.id, { assigned_to: null })).body.data.assigned_to).toBeNull();
    });

    it('validates every field', async () => {
      const bad = async (body: unknown, field: string) => {
        const res = await call(t.app, 'POST', '/api/grievances', { token: owner.token, body });
        expectError(res, 422, 'validation_error');
        expect(Object.keys(res.body.details), JSON.stringify(body)).toContain(field);
      };
      await bad({}, 'title');
      await bad({ title: '' }, 'title');
      await bad({ title: '   ' }, 'title');
      await bad({ title: 'x'.repeat(201) }, 'title');
      await bad({ title: 5 }, 'title');
      await bad({ title: 'x', description: 'x'.repeat(5001) }, 'description');
      await bad({ title: 'x', category: 'x'.repeat(101) }, 'category');
      await bad({ title: 'x', priority: 'critical' }, 'priority');
      await bad({ title: 'x', status: 'open' }, 'status');
      await bad({ title: 'x', reporter_phone: '12' }, 'reporter_phone');
      await bad({ title: 'x', reporter_name: 'x'.repeat(201) }, 'reporter_name');
      await bad({ title: 'x', constituency: 'x'.repeat(121) }, 'constituency');
      await bad({ title: 'x', booth: 'x'.repeat(21) }, 'booth');
      // A number is kept as its text, which must fit too (a 500 on PostgreSQL's varchar(20) before).
      await bad({ title: 'x', ward: 1.2345678901234567e-200 }, 'ward');
      await bad({ title: 'x', booth: 1.2345678901234567e30 }, 'booth');
      await bad({ title: 'x', ward: true }, 'ward');
      await bad({ title: 'x', voter_id: 'one' }, 'voter_id');
      await bad({ title: 'x', assigned_to: 0 }, 'assigned_to');
      await bad({ title: 'x', due_at: '2030-01-01T00:00:00Z' }, 'due_at');
      await bad({ title: 'x', resolution_note: 'done' }, 'resolution_note');
      const g = await create(t, owner);
      for (const [body, field] of [
        [{}, 'body'],
        [{ status: 'done' }, 'status'],
        [{ title: '' }, 'title'],
        [{ resolution_note: 'x'.repeat(5001) }, 'resolution_note'],
        [{ id: 5 }, 'id'],
      ] as const) {
        const res = await patch(t, owner, g.id, body);
        expectError(res, 422, 'validation_error');
        expect(Object.keys(res.body.details)).toContain(field);
      }
      for (const query of [
        'per_page=0',
        'per_page=101',
        'page=0',
        'status=done',
        'priority=x',
        'overdue=maybe',
        'assigned_to=abc',
        `search=${'x'.repeat(101)}`,
      ]) {
        expectError(
          await call(t.app, 'GET', `/api/grievances?${query}`, { token: owner.token }),
          422,
          'validation_error',
        );
      }
      expectError(
        await call(t.app, 'GET', '/api/grievances/abc', { token: owner.token }),
        422,
        'validation_error',
      );
      expectError(
        await call(t.app, 'GET', '/api/grievances/999999999', { token: owner.token }),
        404,
        'not_found',
      );
      expectError(await patch(t, owner, 999_999_999, { title: 'x' }), 404, 'not_found');
    });

    it("never shows or changes another workspace's grievance", async () => {
      const other = await register(t.app);
      const g = await create(t, owner, { title: 'Private matter' });
      expectError(
        await call(t.app, 'GET', `/api/grievances/${g.id}`, { token: other.token }),
        404,
        'not_found',
      );
      expectError(await patch(t, other, g.id, { status: 'in_progress' }), 404, 'not_found');
      const list = await call(t.app, 'GET', '/api/grievances?search=Private', { token: other.token });
      expect(list.body.data.total).toBe(0);
      expect(
        (await call(t.app, 'GET', `/api/grievances/${g.id}`, { token: owner.token })).body.data.status,
      ).toBe('open');
    });

    it('volunteers and managers create, read and update; no token is 401', async () => {
      for (const role of ['volunteer', 'manager'] as const) {
        const member = await addMember(t.app, owner, role);
        const g = await create(t, member, { title: `Filed by a ${role}` });
        expect((await call(t.app, 'GET', `/api/grievances/${g.id}`, { token: member.token })).status).toBe(
          200,
        );
        expect((await call(t.app, 'GET', '/api/grievances', { token: member.token })).status).toBe(200);
        expect((await patch(t, member, g.id, { status: 'in_progress' })).status).toBe(200);
      }
      expectError(await call(t.app, 'GET', '/api/grievances'), 401, 'unauthorized');
      expectError(
        await call(t.app, 'POST', '/api/grievances', { body: { title: 'x' } }),
        401,
        'unauthorized',
      );
      expectError(
        await call(t.app, 'PATCH', '/api/grievances/1', { body: { title: 'x' } }),
        401,
        'unauthorized',
      );
    });

    it('writes grievance.created and grievance.resolved to the outbox in the same transaction', async () => {
      const office = await register(t.app);
      const hook = await call(t.app, 'POST', '/api/webhooks', {
        token: office.token,
        body: { url: 'http://127.0.0.1:9/never-called', events: ['grievance.created', 'grievance.resolved'] },
      });
      expect(hook.status).toBe(201);
      const g = await create(t, office);
      await patch(t, office, g.id, { status: 'in_progress' });
      await patch(t, office, g.id, { status: 'resolved' });
      const events = await t.db.kysely
        .selectFrom('webhook_events')
        .select(['type', 'payload'])
        .where('workspace_id', '=', office.user.workspace_id)
        .orderBy('id')
        .execute();
      expect(events.map((e) => e.type)).toEqual(['grievance.created', 'grievance.resolved']);
      expect(JSON.parse(events[1]!.payload)).toMatchObject({ id: g.id, status: 'resolved' });
      const queued = await t.db.kysely
        .selectFrom('webhook_deliveries')
        .select(['status', 'webhook_id'])
        .where('workspace_id', '=', office.user.workspace_id)
        .execute();
      expect(queued).toEqual([
        { status: 'pending', webhook_id: hook.body.data.id },
        { status: 'pending', webhook_id: hook.body.data.id },
      ]);
    });
  });
}
