/**
 * Field work (the contract's fourth part, "Field work: booths, roll pages and poll day"): turfs and their walk
 * lists, visits in batches idempotent by client_id with field-by-field conflicts, progress, poll-day marks by voter
 * or by part and serial, turnout, the to-call list and marks on the live stream; a volunteer held to their turfs.
 */
import { randomUUID } from 'node:crypto';
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
import { listen, openStream } from './stream-helpers.ts';

const ago = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();

for (const dialect of dialects) {
  describe(`field work (${dialect})`, () => {
    let t: TestApp;
    let owner: Account;
    let manager: Account;
    let volunteer: Account;
    let other: Account;
    let base: string;
    /** Booth 7, part 12: houses 10, 9, 9 and 2A (in that order of serials), one voter without a part. */
    const ids: Record<string, number> = {};
    let turf: string;

    const voter = async (key: string, body: Record<string, unknown>) => {
      const res = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { phone: uniquePhone(), ...body },
      });
      expect(res.status, res.raw).toBe(201);
      ids[key] = res.body.data.id as number;
    };
    const visit = (extra: Record<string, unknown>) => ({
      client_id: randomUUID(),
      outcome: 'met',
      visited_at: ago(5),
      ...extra,
    });

    beforeAll(async () => {
      t = await buildTestApp(dialect);
      base = await listen(t);
      owner = await register(t.app);
      manager = await addMember(t.app, owner, 'manager');
      volunteer = await addMember(t.app, owner, 'volunteer');
      other = await addMember(t.app, owner, 'volunteer');
      await call(t.app, 'POST', '/api/voter-fields', {
        token: owner.token,
        body: { key: 'caste', label: 'Caste', type: 'text', sensitive: true },
      });
      await call(t.app, 'POST', '/api/voter-fields', {
        token: owner.token,
        body: { key: 'issue', label: 'Issue', type: 'text' },
      });
      await voter('a', {
        name: 'Asha',
        booth: 'Booth 7',
        part_number: 12,
        serial_number: 4,
        house_number: '10',
        support_level: 1,
      });
      await voter('b', {
        name: 'Bhim',
        booth: 'Booth 7',
        part_number: 12,
        serial_number: 2,
        house_number: '9',
        support_level: 2,
      });
      await voter('c', {
        name: 'Chandra',
        booth: 'Booth 7',
        part_number: 12,
        serial_number: 3,
        house_number: '9',
      });
      await voter('d', {
        name: 'Devi',
        booth: 'Booth 7',
        part_number: 12,
        serial_number: 1,
        house_number: '2A',
        support_level: 5,
      });
      await voter('e', {
        name: 'Esha',
        booth: 'Booth 8',
        part_number: 13,
        serial_number: 1,
        house_number: '1',
        support_level: 1,
      });
      const made = await call(t.app, 'POST', '/api/turfs', {
        token: manager.token,
        body: { name: 'Part 12', filters: { part_number: 12 }, assigned_to: [volunteer.user.id] },
      });
      expect(made.status, made.raw).toBe(201);
      turf = made.body.data.id as string;
      expect(made.body.data).toMatchObject({
        name: 'Part 12',
        filters: { part_number: 12 },
        assigned_to: [volunteer.user.id],
        voters: 4,
        households: 3,
      });
      expect(turf).toMatch(/^turf_\d+$/);
    });
    afterAll(() => t.close());

    it('turfs: politicians and managers make them; a volunteer reads only their own', async () => {
      expectError(
        await call(t.app, 'POST', '/api/turfs', {
          token: volunteer.token,
          body: { name: 'Mine', filters: { part_number: 13 } },
        }),
        403,
        'forbidden',
      );
      expectError(
        await call(t.app, 'POST', '/api/turfs', { token: owner.token, body: { name: 'All', filters: {} } }),
        422,
        'validation_error',
      );
      const bad = await call(t.app, 'POST', '/api/turfs', {
        token: owner.token,
        body: { name: 'X', filters: { part_number: 13 }, assigned_to: [999999] },
      });
      expectError(bad, 422, 'validation_error');
      expect(bad.body.details.assigned_to[0]).toContain('999999');
      const second = await call(t.app, 'POST', '/api/turfs', {
        token: owner.token,
        body: { name: 'Part 13', filters: { part_number: 13 }, assigned_to: [other.user.id] },
      });
      expect(second.status).toBe(201);
      const mine = await call(t.app, 'GET', '/api/turfs', { token: volunteer.token });
      expect(mine.body.data.data.map((x: { id: string }) => x.id)).toEqual([turf]);
      const all = await call(t.app, 'GET', '/api/turfs', { token: manager.token });
      expect(all.body.data.total).toBe(2);
      expectError(
        await call(t.app, 'GET', `/api/turfs/${second.body.data.id}`, { token: volunteer.token }),
        404,
        'not_found',
      );
      const renamed = await call(t.app, 'PATCH', `/api/turfs/${second.body.data.id}`, {
        token: manager.token,
        body: { name: 'Part 13 (east)', assigned_to: [] },
      });
      expect(renamed.body.data).toMatchObject({ name: 'Part 13 (east)', assigned_to: [], voters: 1 });
      expect(
        (await call(t.app, 'DELETE', `/api/turfs/${second.body.data.id}`, { token: manager.token })).status,
      ).toBe(200);
      expect((await call(t.app, 'GET', '/api/turfs', { token: other.token })).body.data.total).toBe(0);
    });

    it("a volunteer's turfs are their part of the roll: their voters are read, others are not found", async () => {
      // The volunteer has no coverage: the turf alone gives them part 12.
      const mine = await call(t.app, 'GET', `/api/voters/${ids.a}`, { token: volunteer.token });
      expect(mine.status, mine.raw).toBe(200);
      expect(mine.body.data).not.toHaveProperty('support_level');
      expectError(
        await call(t.app, 'GET', `/api/voters/${ids.e}`, { token: volunteer.token }),
        404,
        'not_found',
      );
      const list = await call(t.app, 'GET', '/api/voters?per_page=100', { token: volunteer.token });
      expect(list.body.data.data.map((v: { id: number }) => v.id).sort()).toEqual(
        [ids.a, ids.b, ids.c, ids.d].sort(),
      );
      // A turf is a stretch of the roll, never a search.
      const searched = await call(t.app, 'POST', '/api/turfs', {
        token: owner.token,
        body: { name: 'Searched', filters: { search: 'Asha' } },
      });
      expectError(searched, 422, 'validation_error');
      expect(searched.body.details).toHaveProperty(['filters.search']);
    });

    it('the walk list keeps a household together, and shows support only to the office', async () => {
      const list = await call(t.app, 'GET', `/api/turfs/${turf}/walk-list`, { token: volunteer.token });
      expect(list.status, list.raw).toBe(200);
      const items = list.body.data.data as Array<Record<string, unknown>>;
      // House 2A (a number first), then 9 (serials 2 and 3 together), then 10: by number, not as text.
      expect(items.map((v) => v.name)).toEqual(['Devi', 'Bhim', 'Chandra', 'Asha']);
      for (const item of items) {
        expect(item).not.toHaveProperty('support_level');
        expect(item).not.toHaveProperty('fields');
        expect(item.last_visit).toBeNull();
      }
      const office = await call(t.app, 'GET', `/api/turfs/${turf}/walk-list?per_page=2000`, {
        token: manager.token,
      });
      expect(office.body.data.data[0]).toMatchObject({ name: 'Devi', support_level: 5, part_number: 12 });
      expectError(
        await call(t.app, 'GET', `/api/turfs/${turf}/walk-list?per_page=2001`, { token: manager.token }),
        422,
        'validation_error',
      );
    });

    it('visits: created once by client_id, duplicates change nothing, one bad visit does not stop the others', async () => {
      const first = visit({
        voter_id: ids.a,
        tags_add: ['Wants road'],
        fields: { issue: 'water' },
        note: 'Asked about water',
      });
      const res = await call(t.app, 'POST', '/api/visits', {
        token: volunteer.token,
        body: {
          visits: [
            first,
            visit({ voter_id: ids.e }),
            visit({ voter_id: 99_999_999 }),
            visit({ voter_id: ids.b, support_level: 1 }),
            visit({ voter_id: ids.c, fields: { caste: 'X' } }),
            visit({
              voter_id: ids.d,
              outcome: 'not_home',
              visited_at: new Date(Date.now() + 3_600_000).toISOString(),
            }),
          ],
        },
      });
      expect(res.status, res.raw).toBe(200);
      const [created, outside, missing, support, caste, future] = res.body.data.visits;
      expect(created).toMatchObject({ client_id: first.client_id, status: 'created' });
      expect(created.id).toMatch(/^vis_\d+$/);
      // Outside the turf and not existing read the same: a volunteer learns nothing of voters beyond their turfs.
      expect(outside).toMatchObject({ status: 'rejected', id: null, error: { error_code: 'not_found' } });
      expect(missing.error).toEqual(outside.error);
      expect(support.error.details).toHaveProperty('support_level');
      expect(caste.error.details).toHaveProperty(['fields.caste']);
      expect(future.error.details.visited_at[0]).toContain('future');
      const again = await call(t.app, 'POST', '/api/visits', {
        token: volunteer.token,
        body: { visits: [{ ...first, note: 'changed' }] },
      });
      expect(again.body.data.visits[0]).toEqual({
        client_id: first.client_id,
        id: created.id,
        status: 'duplicate',
      });
      const read = await call(t.app, 'GET', `/api/voters/${ids.a}`, { token: manager.token });
      expect(read.body.data.tags).toContain('Wants road');
      expect(read.body.data.fields.issue).toBe('water');
      const stored = await call(t.app, 'GET', `/api/visits?voter_id=${ids.a}`, { token: manager.token });
      expect(stored.body.data.data).toHaveLength(1);
      expect(stored.body.data.data[0]).toMatchObject({
        note: 'Asked about water',
        user_id: volunteer.user.id,
      });
      const walk = await call(t.app, 'GET', `/api/turfs/${turf}/walk-list`, { token: volunteer.token });
      const asha = walk.body.data.data.find((v: { id: number }) => v.id === ids.a);
      expect(asha.last_visit).toMatchObject({ outcome: 'met', by: { id: volunteer.user.id } });
    });

    it('a field changed on the service after the visit keeps its newer value, and the visit says so', async () => {
      // The office sets support now; a visit made an hour ago, synced late, does not overwrite it.
      await call(t.app, 'PUT', `/api/voters/${ids.c}`, { token: manager.token, body: { support_level: 3 } });
      const late = visit({
        voter_id: ids.c,
        visited_at: ago(60),
        support_level: 1,
        fields: { issue: 'roads' },
      });
      const res = await call(t.app, 'POST', '/api/visits', {
        token: manager.token,
        body: { visits: [late] },
      });
      expect(res.body.data.visits[0]).toMatchObject({ status: 'created', not_applied: ['support_level'] });
      const read = await call(t.app, 'GET', `/api/voters/${ids.c}`, { token: manager.token });
      expect(read.body.data).toMatchObject({ support_level: 3, fields: { issue: 'roads' } });
      // A value the office gives an empty field is newer too.
      await call(t.app, 'PUT', `/api/voters/${ids.d}`, {
        token: manager.token,
        body: { fields: { issue: 'school' } },
      });
      const stale = visit({ voter_id: ids.d, visited_at: ago(30), fields: { issue: 'water' } });
      const kept = await call(t.app, 'POST', '/api/visits', {
        token: manager.token,
        body: { visits: [stale] },
      });
      expect(kept.body.data.visits[0].not_applied).toEqual(['fields.issue']);
      // So is a bulk edit's.
      const bulk = await call(t.app, 'POST', '/api/voters/tags', {
        token: manager.token,
        body: { voter_ids: [ids.e], set: { fields: { issue: 'bulk' } } },
      });
      expect(bulk.status, bulk.raw).toBe(200);
      const beforeBulk = visit({ voter_id: ids.e, visited_at: ago(40), fields: { issue: 'door' } });
      const afterBulk = await call(t.app, 'POST', '/api/visits', {
        token: manager.token,
        body: { visits: [beforeBulk] },
      });
      expect(afterBulk.body.data.visits[0].not_applied).toEqual(['fields.issue']);
      // Two offline visits synced newest first: the older does not undo the newer.
      const newer = visit({ voter_id: ids.d, visited_at: ago(10), support_level: 2 });
      const older = visit({ voter_id: ids.d, visited_at: ago(20), support_level: 4 });
      await call(t.app, 'POST', '/api/visits', { token: manager.token, body: { visits: [newer] } });
      const second = await call(t.app, 'POST', '/api/visits', {
        token: manager.token,
        body: { visits: [older] },
      });
      expect(second.body.data.visits[0].not_applied).toEqual(['support_level']);
      expect(
        (await call(t.app, 'GET', `/api/voters/${ids.d}`, { token: manager.token })).body.data.support_level,
      ).toBe(2);
      const dup = await call(t.app, 'POST', '/api/visits', {
        token: manager.token,
        body: { visits: [older] },
      });
      expect(dup.body.data.visits[0]).toMatchObject({ status: 'duplicate', not_applied: ['support_level'] });
    });

    it("a visit's survey answers are a response with channel visit", async () => {
      const survey = await call(t.app, 'POST', '/api/surveys', {
        token: owner.token,
        body: {
          name: 'Door survey',
          questions: [
            {
              key: 'issue',
              type: 'choice',
              text: { en: 'Biggest issue?' },
              choices: [
                { key: 'water', label: { en: 'Water' } },
                { key: 'roads', label: { en: 'Roads' } },
              ],
              save_to: 'field:issue',
            },
            {
              key: 'support',
              type: 'number',
              text: { en: 'Support 1-5?' },
              min: 1,
              max: 5,
              save_to: 'support_level',
            },
          ],
        },
      });
      expect(survey.status, survey.raw).toBe(201);
      const id = survey.body.data.id as string;
      // The turf's door survey: its questions reach the visit form, less a volunteer's sensitive one.
      const set = await call(t.app, 'PATCH', `/api/turfs/${turf}`, {
        token: manager.token,
        body: { survey_id: id },
      });
      expect(set.body.data.survey.questions.map((q: { key: string }) => q.key)).toEqual(['issue', 'support']);
      const seen = await call(t.app, 'GET', `/api/turfs/${turf}`, { token: volunteer.token });
      expect(seen.body.data.survey).toMatchObject({ id, name: 'Door survey' });
      expect(seen.body.data.survey.questions.map((q: { key: string }) => q.key)).toEqual(['issue']);
      expectError(
        await call(t.app, 'PATCH', `/api/turfs/${turf}`, {
          token: manager.token,
          body: { survey_id: 'svy_999999' },
        }),
        422,
        'validation_error',
      );
      const byVolunteer = await call(t.app, 'POST', '/api/visits', {
        token: volunteer.token,
        body: {
          visits: [
            visit({ voter_id: ids.b, survey_id: id, answers: { issue: 'Roads', support: 1 } }),
            visit({ voter_id: ids.b, survey_id: id, answers: { issue: 'roads' } }),
            visit({ voter_id: ids.b, survey_id: id, answers: { issue: 'sky' } }),
          ],
        },
      });
      const [sensitive, fine, wrong] = byVolunteer.body.data.visits;
      expect(sensitive.error.details).toHaveProperty(['answers.support']);
      expect(fine.status).toBe('created');
      expect(wrong.error.details['answers.issue'][0]).toContain('water');
      const responses = await call(t.app, 'GET', `/api/surveys/${id}/responses`, { token: manager.token });
      expect(responses.status, responses.raw).toBe(200);
      expect(responses.body.data.data).toHaveLength(1);
      expect(responses.body.data.data[0]).toMatchObject({
        channel: 'visit',
        status: 'partial',
        voter_id: ids.b,
        answers: { issue: 'roads' },
      });
      const read = await call(t.app, 'GET', `/api/voters/${ids.b}`, { token: manager.token });
      expect(read.body.data.fields.issue).toBe('roads');
      const visits = await call(t.app, 'GET', `/api/visits?voter_id=${ids.b}`, { token: volunteer.token });
      expect(visits.body.data.data[0]).toMatchObject({ survey_id: id });
      expect(visits.body.data.data[0].response_id).toMatch(/^sres_\d+$/);
      expect(visits.body.data.data[0]).not.toHaveProperty('support_level');
    });

    it('progress per turf; a volunteer lists only their own visits', async () => {
      const progress = await call(t.app, 'GET', `/api/turfs/${turf}/progress`, { token: manager.token });
      expect(progress.status, progress.raw).toBe(200);
      expect(progress.body.data).toMatchObject({ voters: 4, households: 3, visited: 4, met: 4 });
      expect(progress.body.data.by_outcome.met).toBe(4);
      expect(progress.body.data.by_support).toMatchObject({ '1': 1, '2': 2, '3': 1 });
      const theirs = await call(t.app, 'GET', `/api/turfs/${turf}/progress`, { token: volunteer.token });
      expect(theirs.body.data).not.toHaveProperty('by_support');
      expectError(
        await call(t.app, 'GET', `/api/visits?user_id=${manager.user.id}`, { token: volunteer.token }),
        403,
        'forbidden',
      );
      const own = await call(t.app, 'GET', '/api/visits', { token: volunteer.token });
      expect(own.body.data.data.every((v: { user_id: number }) => v.user_id === volunteer.user.id)).toBe(
        true,
      );
      const inTurf = await call(t.app, 'GET', `/api/visits?turf_id=${turf}&since=${ago(30)}`, {
        token: manager.token,
      });
      expect(inTurf.body.data.total).toBeGreaterThan(0);
    });

    it('poll day: marks by voter or slip, once; the latest mark wins; turnout, to-call and the stream', async () => {
      const board = await openStream(base, manager.token);
      const own = await openStream(base, volunteer.token);
      const stranger = await openStream(base, other.token);
      const slip = {
        client_id: randomUUID(),
        part_number: 12,
        serial_number: 4,
        voted: true,
        marked_at: ago(3),
      };
      const res = await call(t.app, 'POST', '/api/poll-day/marks', {
        token: volunteer.token,
        body: {
          marks: [
            slip,
            { client_id: randomUUID(), voter_id: ids.e, voted: true, marked_at: ago(3) },
            { client_id: randomUUID(), part_number: 12, serial_number: 99, voted: true, marked_at: ago(3) },
            { client_id: randomUUID(), voted: true, marked_at: ago(3) },
          ],
        },
      });
      expect(res.status, res.raw).toBe(200);
      const [byslip, outside, unknown, nameless] = res.body.data.marks;
      expect(byslip).toMatchObject({ status: 'created', voter_id: ids.a });
      expect(outside.error).toEqual(unknown.error);
      expect(nameless.error.error_code).toBe('validation_error');
      const again = await call(t.app, 'POST', '/api/poll-day/marks', {
        token: volunteer.token,
        body: { marks: [slip] },
      });
      expect(again.body.data.marks[0]).toMatchObject({ status: 'duplicate', id: byslip.id });
      // A manager marks Bhim voted, then an older "not voted" arrives late: the newer stands.
      await call(t.app, 'POST', '/api/poll-day/marks', {
        token: manager.token,
        body: {
          marks: [
            { client_id: randomUUID(), voter_id: ids.b, voted: true, marked_at: ago(1) },
            { client_id: randomUUID(), voter_id: ids.b, voted: false, marked_at: ago(2) },
            { client_id: randomUUID(), voter_id: ids.e, voted: true, marked_at: ago(1) },
          ],
        },
      });
      const turnout = await call(t.app, 'GET', '/api/poll-day/turnout?group_by=booth', {
        token: manager.token,
      });
      expect(turnout.status, turnout.raw).toBe(200);
      expect(turnout.body.data.data).toEqual([
        { group: 'Booth 7', voters: 4, voted: 2, supporters: 3, supporters_voted: 2 },
        { group: 'Booth 8', voters: 1, voted: 1, supporters: 1, supporters_voted: 1 },
      ]);
      const byPart = await call(t.app, 'GET', '/api/poll-day/turnout?group_by=part_number&part_number=12', {
        token: manager.token,
      });
      expect(byPart.body.data.data).toEqual([
        { group: 12, voters: 4, voted: 2, supporters: 3, supporters_voted: 2 },
      ]);
      // A voter marked, then no longer a supporter: turnout follows (the marks keep the voter's support in step).
      await call(t.app, 'PUT', `/api/voters/${ids.a}`, { token: manager.token, body: { support_level: 4 } });
      const after = await call(t.app, 'GET', '/api/poll-day/turnout', { token: manager.token });
      expect(after.body.data.data[0]).toEqual({
        group: 'Booth 7',
        voters: 4,
        voted: 2,
        supporters: 2,
        supporters_voted: 1,
      });
      // With filters the same counts come from the voters themselves.
      const filtered = await call(t.app, 'GET', '/api/poll-day/turnout?group_by=booth&part_number=12', {
        token: manager.token,
      });
      expect(filtered.body.data.data).toEqual([after.body.data.data[0]]);
      await call(t.app, 'PUT', `/api/voters/${ids.a}`, { token: manager.token, body: { support_level: 1 } });
      const toCall = await call(t.app, 'GET', '/api/poll-day/to-call?booth=booth%207', {
        token: manager.token,
      });
      expect(toCall.body.data.data.map((v: { name: string }) => v.name)).toEqual(['Devi']);
      expect(toCall.body.data.data[0].phone).toMatch(/^\+/);
      expectError(
        await call(t.app, 'GET', '/api/poll-day/to-call', { token: volunteer.token }),
        403,
        'forbidden',
      );
      expectError(
        await call(t.app, 'GET', '/api/poll-day/turnout', { token: volunteer.token }),
        403,
        'forbidden',
      );
      const deadline = Date.now() + 5000;
      while (board.events.filter((e) => e.type === 'poll_day.marked').length < 4 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 50));
      const marks = board.events.filter((e) => e.type === 'poll_day.marked');
      expect(marks).toHaveLength(4);
      for (const event of marks) {
        expect(Object.keys(event.data).sort()).toEqual(
          ['booth', 'by', 'id', 'marked_at', 'part_number', 'serial_number', 'voted', 'voter_id'].sort(),
        );
      }
      // A volunteer's stream carries their own marks only; another volunteer's carries none.
      expect(own.events.filter((e) => e.type === 'poll_day.marked').map((e) => e.data.id)).toEqual([
        byslip.id,
      ]);
      expect(stranger.events.filter((e) => e.type === 'poll_day.marked')).toEqual([]);
      for (const s of [board, own, stranger]) s.close();
    });
  });
}
