/**
 * Sensitive values stay private (contract, fifth part, "Sensitive answers stay private"): a survey answer that
 * saves to support_level or to a sensitive field is withheld from the volunteer who holds the conversation, left
 * out of the `survey.response.completed` webhook and of a manager's export (a politician's export with
 * include_sensitive has it, audited as sensitive); a volunteer's live stream carries no grievance the API would not
 * give them, live or on Last-Event-ID replay.
 */
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { SurveyRuns } from '../src/modules/surveys/survey-runs.ts';
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
import { isolatedDatabase, until } from './messaging-helpers.ts';
import { listen, openStream } from './stream-helpers.ts';

const silent = pino({ level: 'silent' });

for (const dialect of dialects) {
  describe(`sensitive answers stay private (${dialect})`, () => {
    let t: TestApp;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    let worker: DeliveryWorker;
    let base: string;
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      t = await buildTestApp(dialect, { ...database.env, WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
      worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
      base = await listen(t);
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
    });

    const api = (who: Account, method: string, url: string, body?: unknown) =>
      call(t.app, method as 'GET', url, { token: who.token, ...(body !== undefined ? { body } : {}) });

    it("a volunteer's thread, the webhook and a manager's export never hold an answer that saves to support_level or a sensitive field", async () => {
      const owner = await register(t.app);
      const manager = await addMember(t.app, owner, 'manager');
      const volunteer = await addMember(t.app, owner, 'volunteer');
      await api(owner, 'POST', '/api/voter-fields', {
        key: 'caste',
        label: 'Caste',
        type: 'choice',
        choices: ['General', 'SC', 'OBC'],
        sensitive: true,
      });
      const hook = await api(owner, 'POST', '/api/webhooks', {
        url: 'http://127.0.0.1:9/ces',
        events: ['survey.response.completed'],
      });
      expect(hook.status, hook.raw).toBe(201);
      const phone = uniquePhone();
      const voter = (await api(owner, 'POST', '/api/voters', { name: 'Shanti Devi', phone, ward: 'Ward 5' }))
        .body.data;
      const survey = (
        await api(owner, 'POST', '/api/surveys', {
          name: 'Booth survey',
          questions: [
            {
              key: 'support',
              type: 'number',
              text: { en: 'Support, 1 to 5?' },
              min: 1,
              max: 5,
              save_to: 'support_level',
            },
            {
              key: 'caste',
              type: 'choice',
              text: { en: 'Community? 1 General 2 SC 3 OBC' },
              choices: [
                { key: '1', label: { en: 'General' } },
                { key: '2', label: { en: 'SC' } },
                { key: '3', label: { en: 'OBC' } },
              ],
              save_to: 'field:caste',
            },
            { key: 'issue', type: 'text', text: { en: 'Your biggest issue?' } },
          ],
        })
      ).body.data;
      await api(owner, 'POST', `/api/surveys/${survey.id}/runs`, { channel: 'sms', recipients: [phone] });
      const runs = new SurveyRuns({ db: t.db.kysely, sessionHours: 24 });
      while (await runs.round()) {
        /* open the session */
      }
      for (const answer of ['5', '2', 'The drain']) {
        await worker.drain();
        await api(owner, 'POST', '/api/inbound', { channel: 'sms', from: phone, body: answer });
      }
      const response = (await api(owner, 'GET', `/api/surveys/${survey.id}/responses`)).body.data.data[0];
      expect(response).toMatchObject({
        status: 'completed',
        answers: { support: 5, caste: '2', issue: 'The drain' },
      });
      expect((await api(owner, 'GET', `/api/voters/${voter.id}`)).body.data).toMatchObject({
        support_level: 5,
        fields: { caste: 'SC' },
      });

      // The conversation is the volunteer's: the two answers are withheld, the third is not.
      const conversation = (await api(owner, 'GET', '/api/conversations')).body.data.data.find(
        (c: { address: string }) => c.address === phone,
      );
      await api(owner, 'PATCH', `/api/conversations/${conversation.id}`, { assigned_to: volunteer.user.id });
      const thread = async (who: Account) =>
        (
          (await api(who, 'GET', `/api/conversations/${conversation.id}/messages?per_page=100`)).body.data
            .data as Array<{ direction: string; body: string; withheld?: boolean }>
        ).filter((m) => m.direction === 'inbound');
      expect(await thread(volunteer)).toEqual([
        expect.objectContaining({ body: '', withheld: true }),
        expect.objectContaining({ body: '', withheld: true }),
        expect.objectContaining({ body: 'The drain' }),
      ]);
      expect(JSON.stringify(await thread(volunteer))).not.toMatch(/"5"|"2"/);
      // A manager, who may read support levels and sensitive fields, reads them.
      expect((await thread(manager)).map((m) => m.body)).toEqual(['5', '2', 'The drain']);

      // The webhook's event: the answers that are sensitive values are not in it.
      const events = await t.db.kysely
        .selectFrom('webhook_events')
        .select('payload')
        .where('type', '=', 'survey.response.completed')
        .execute();
      const payload = events.map((e) => JSON.parse(e.payload) as { answers: Record<string, unknown> });
      const ours = payload.find((p) => 'issue' in p.answers)!;
      expect(ours.answers).toEqual({ issue: 'The drain' });

      // A manager's export leaves both columns out; include_sensitive is 403 for them.
      const exported = await api(manager, 'GET', `/api/surveys/${survey.id}/responses/export?format=csv`);
      expect(exported.status).toBe(200);
      const header = exported.raw.split('\n')[0]!;
      expect(header).toContain('issue');
      expect(header).not.toMatch(/support|caste/);
      expectError(
        await api(manager, 'GET', `/api/surveys/${survey.id}/responses/export?include_sensitive=true`),
        403,
        'forbidden',
      );
      // A politician's with include_sensitive has them, audited as a sensitive export.
      const full = await api(
        owner,
        'GET',
        `/api/surveys/${survey.id}/responses/export?include_sensitive=true`,
      );
      expect(full.raw.split('\n')[0]).toMatch(/status,booth,.*support.*caste/);
      // A choice is exported as the voter was asked it (its label), not as its key.
      expect(full.raw.split('\n')[1]).toMatch(/,SC,The drain/);
      const audit = await api(owner, 'GET', '/api/audit-log?action=survey.exported_sensitive');
      expect(audit.body.data.data).toHaveLength(1);
    });

    it("a volunteer's stream carries the grievances assigned to them, no other, live or replayed", async () => {
      const owner = await register(t.app);
      const volunteer = await addMember(t.app, owner, 'volunteer');
      const stream = await openStream(base, volunteer.token);
      expect(stream.status).toBe(200);
      const grievance = async (title: string, assigned?: number) =>
        (
          await api(owner, 'POST', '/api/grievances', {
            title,
            description: 'my husband beats me, please help quietly',
            reporter_name: 'A voter',
            reporter_phone: uniquePhone(),
            ...(assigned !== undefined ? { assigned_to: assigned } : {}),
          })
        ).body.data;
      const hidden = await grievance('Not theirs');
      const theirs = await grievance('Theirs', volunteer.user.id);
      await until(async () => stream.events.some((e) => e.type === 'grievance.created'), 'the event');
      await new Promise((resolve) => setTimeout(resolve, 300));
      const seen = stream.events.filter((e) => e.type === 'grievance.created').map((e) => e.data.id);
      expect(seen).toEqual([theirs.id]);
      expect(JSON.stringify(stream.events)).not.toContain(String(hidden.title));
      stream.close();
      // On Last-Event-ID replay too.
      const replay = await openStream(base, volunteer.token, '0');
      await until(async () => replay.events.length > 0, 'the replay');
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(replay.events.filter((e) => e.type.startsWith('grievance.')).map((e) => e.data.id)).toEqual([
        theirs.id,
      ]);
      replay.close();
      // The owner sees both.
      const all = await openStream(base, owner.token, '0');
      await until(
        async () => all.events.filter((e) => e.type === 'grievance.created').length === 2,
        "the owner's replay",
      );
      all.close();
    });
  });
}
