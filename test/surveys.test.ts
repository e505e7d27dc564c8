import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { SurveyRuns } from '../src/modules/surveys/survey-runs.ts';
import {
  type Account,
  addMember,
  buildTestApp,
  buildTwoApps,
  call,
  dialects,
  expectError,
  parseCsv,
  register,
  type TestApp,
  uniquePhone,
} from './helpers.ts';
import { isolatedDatabase } from './messaging-helpers.ts';

/**
 * Surveys (the contract's fourth part, "Surveys: ask voters on every channel"): the builder's checks, runs over
 * SMS with sessions answered by key, Devanagari digit, label and keyword, re-asking, STOP, expiry, keyword
 * triggers, save_to, results by booth, responses and their export.
 */
const silent = pino({ level: 'silent' });

const opinion = {
  name: 'Ward opinion',
  intro: { en: 'A short survey from your MLA office.', hi: 'आपके विधायक कार्यालय का छोटा सर्वे।' },
  outro: { en: 'Thank you!', hi: 'धन्यवाद!' },
  retries: 1,
  questions: [
    {
      key: 'vote',
      type: 'choice',
      text: { en: 'Will you vote for us?', hi: 'क्या आप हमें वोट देंगे?' },
      choices: [
        { key: '1', label: { en: 'Yes', hi: 'हाँ' }, keywords: ['haan'] },
        { key: '2', label: { en: 'No', hi: 'नहीं' } },
        { key: '3', label: { en: 'Undecided', hi: 'तय नहीं' } },
      ],
      save_to: 'support_level',
    },
    {
      key: 'household',
      type: 'number',
      text: { en: 'How many voters live in your house?', hi: 'आपके घर में कितने मतदाता हैं?' },
      min: 1,
      max: 30,
    },
    {
      key: 'problem',
      type: 'text',
      text: { en: 'What is the biggest problem in your ward?', hi: 'आपके वार्ड की सबसे बड़ी समस्या क्या है?' },
    },
  ],
};

for (const dialect of dialects) {
  describe(`surveys (${dialect})`, () => {
    let t: TestApp;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    let worker: DeliveryWorker;
    let runs: SurveyRuns;
    let now = new Date();
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      t = await buildTestApp(dialect, { ...database.env, WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
      worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
      runs = new SurveyRuns({ db: t.db.kysely, sessionHours: 24, clock: () => now });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
    });

    const api = (who: Account, method: string, url: string, body?: unknown) =>
      call(t.app, method as 'GET', url, { token: who.token, ...(body !== undefined ? { body } : {}) });
    /** A voter's reply, once what was sent to them has gone (an answer is taken only to a question handed over). */
    const reply = async (who: Account, from: string, body: string, channel = 'sms') => {
      await worker.drain();
      return api(who, 'POST', '/api/inbound', { channel, from, body });
    };
    /** The survey's messages to `to`, oldest first. */
    const sent = async (who: Account, to: string) => {
      const res = await api(who, 'GET', `/api/messages/history?per_page=100&to=${encodeURIComponent(to)}`);
      return (res.body.data.data as Array<{ message: string; created_at: string; id: string }>)
        .slice()
        .sort((a, b) => Number(a.id.slice(4)) - Number(b.id.slice(4)))
        .map((m) => m.message);
    };
    const settle = async () => {
      while (await runs.round()) {
        /* until nothing is left to do */
      }
      await worker.drain();
    };

    it('checks a survey as a builder would get it wrong, and keeps a good one', async () => {
      const owner = await register(t.app);
      const bad = await api(owner, 'POST', '/api/surveys', {
        name: 'Bad',
        questions: [
          { key: 'Q 1', type: 'choice', text: { en: 'Pick' }, choices: [{ key: '1', label: { en: 'A' } }] },
          { key: 'n', type: 'number', text: { english: 'x' }, min: 5, max: 1 },
          {
            key: 'c',
            type: 'choice',
            text: { en: 'x' },
            choices: [
              { key: '1', label: { en: 'Yes' } },
              { key: '2', label: { en: 'yes' } },
            ],
            save_to: 'field:nope',
          },
        ],
        triggers: [{ channel: 'sms', keyword: 'stop' }],
      });
      expectError(bad, 422, 'validation_error');
      expect(Object.keys(bad.body.details).sort()).toEqual(
        [
          'questions.0.key',
          'questions.0.choices',
          'questions.1.text',
          'questions.1.max',
          'questions.2.choices.1',
          'questions.2.save_to',
          'triggers.0.keyword',
        ].sort(),
      );
      const made = await api(owner, 'POST', '/api/surveys', {
        ...opinion,
        triggers: [{ channel: 'sms', keyword: 'Opinion' }],
        status: 'active',
      });
      expect(made.status, JSON.stringify(made.body)).toBe(201);
      expect(made.body.data).toMatchObject({
        status: 'active',
        retries: 1,
        has_run: false,
        triggers: [{ channel: 'sms', keyword: 'opinion' }],
      });
      expect(made.body.data.id).toMatch(/^svy_\d+$/);
      // Another active survey may not take the same keyword.
      const clash = await api(owner, 'POST', '/api/surveys', {
        ...opinion,
        name: 'Copy',
        triggers: [{ channel: 'sms', keyword: 'OPINION' }],
        status: 'active',
      });
      expectError(clash, 409, 'conflict');
      const volunteer = await addMember(t.app, owner, 'volunteer');
      expectError(await api(volunteer, 'GET', '/api/surveys'), 403, 'forbidden');
      const other = await register(t.app);
      expectError(await api(other, 'GET', `/api/surveys/${made.body.data.id}`), 404, 'not_found');
      const listed = await api(owner, 'GET', '/api/surveys');
      expect(listed.body.data.total).toBe(1);
    });

    it("runs over SMS: asks in the voter's language, matches keys, Devanagari digits and keywords, asks again, saves to the voter, counts results by booth", async () => {
      const owner = await register(t.app);
      const hindi = uniquePhone();
      const english = uniquePhone();
      const quitter = uniquePhone();
      const a = await api(owner, 'POST', '/api/voters', {
        name: 'Asha',
        phone: hindi,
        language: 'hi',
        booth: 'Booth 7',
      });
      await api(owner, 'POST', '/api/voters', { name: 'Ben', phone: english, booth: 'Booth 9' });
      await api(owner, 'POST', '/api/voters', { name: 'Chitra', phone: quitter, booth: 'Booth 9' });
      const hook = await api(owner, 'POST', '/api/webhooks', {
        url: 'http://127.0.0.1:9/survey-hook',
        events: ['survey.response.completed'],
      });
      expect(hook.status, hook.raw).toBe(201);
      const survey = (await api(owner, 'POST', '/api/surveys', opinion)).body.data;
      const run = await api(owner, 'POST', `/api/surveys/${survey.id}/runs`, {
        channel: 'sms',
        filters: { search: '' },
        recipients: [hindi],
      });
      expectError(run, 422, 'validation_error');
      const started = await api(owner, 'POST', `/api/surveys/${survey.id}/runs`, {
        channel: 'sms',
        recipients: [hindi, english, quitter],
      });
      expect(started.status, JSON.stringify(started.body)).toBe(202);
      expect(started.body.data).toMatchObject({ status: 'running', recipients: 3, channel: 'sms' });
      await settle();

      const first = await sent(owner, hindi);
      expect(first).toHaveLength(1);
      expect(first[0]).toContain('आपके विधायक कार्यालय का छोटा सर्वे।');
      expect(first[0]).toContain('1. हाँ');
      expect((await sent(owner, english))[0]).toContain('Will you vote for us?');

      // Asha answers in Devanagari digits, then an answer out of range (asked again), then a number, then text.
      await reply(owner, hindi, '१');
      await reply(owner, hindi, '99');
      await settle();
      const asked = await sent(owner, hindi);
      expect(asked).toHaveLength(3);
      expect(asked[2]).toMatch(/^क्षमा करें/);
      await reply(owner, hindi, '4');
      await reply(owner, hindi, 'Water logging near the school');
      // Ben answers by keyword and then gives no usable answer twice: `other`, and the survey moves on.
      await reply(owner, english, 'HAAN');
      await reply(owner, english, 'many');
      await reply(owner, english, 'lots');
      // Chitra says STOP: her session ends, and she is opted out as before.
      await reply(owner, quitter, 'STOP');
      await settle();
      expect((await sent(owner, hindi)).at(-1)).toBe('धन्यवाद!');

      const voter = (await api(owner, 'GET', `/api/voters/${a.body.data.id}`)).body.data;
      expect(voter.support_level).toBe(1);
      const audit = await api(owner, 'GET', '/api/audit-log?action=voter.updated');
      expect(audit.body.data.data[0].details).toMatchObject({
        actor: 'survey',
        survey_id: survey.id,
        support_level: 1,
      });

      const progress = (await api(owner, 'GET', `/api/survey-runs/${started.body.data.id}`)).body.data;
      expect(progress).toMatchObject({ recipients: 3, started: 3, completed: 1, opted_out: 1, open: 1 });

      const results = (await api(owner, 'GET', `/api/surveys/${survey.id}/results?group_by=booth`)).body.data;
      expect(results).toMatchObject({ responses: 3, completed: 1 });
      const vote = results.questions.find((q: { key: string }) => q.key === 'vote');
      expect(vote.choices).toEqual([
        { key: '1', count: 2 },
        { key: '2', count: 0 },
        { key: '3', count: 0 },
      ]);
      expect(vote.groups).toEqual([
        {
          group: 'Booth 7',
          answered: 1,
          choices: [
            { key: '1', count: 1 },
            { key: '2', count: 0 },
            { key: '3', count: 0 },
          ],
        },
        {
          group: 'Booth 9',
          answered: 1,
          choices: [
            { key: '1', count: 1 },
            { key: '2', count: 0 },
            { key: '3', count: 0 },
          ],
        },
      ]);
      const household = results.questions.find((q: { key: string }) => q.key === 'household');
      expect(household).toMatchObject({ answered: 2, mean: 4 });
      const filtered = (await api(owner, 'GET', `/api/surveys/${survey.id}/results?booth=Booth%207`)).body
        .data;
      expect(filtered.responses).toBe(1);

      const responses = (await api(owner, 'GET', `/api/surveys/${survey.id}/responses?status=completed`)).body
        .data;
      expect(responses.data).toHaveLength(1);
      expect(responses.data[0]).toMatchObject({
        address: hindi,
        status: 'completed',
        answers: { vote: '1', household: 4, problem: 'Water logging near the school' },
      });
      const ben = (await api(owner, 'GET', `/api/surveys/${survey.id}/responses?status=open`)).body.data
        .data[0];
      expect(ben.answers).toEqual({ vote: '1', household: 'other' });

      // The survey has run: its questions are fixed; closing it ends Ben's session.
      expectError(
        await api(owner, 'PATCH', `/api/surveys/${survey.id}`, { questions: opinion.questions.slice(0, 1) }),
        409,
        'conflict',
      );
      expectError(await api(owner, 'DELETE', `/api/surveys/${survey.id}`), 409, 'conflict');
      const closed = await api(owner, 'PATCH', `/api/surveys/${survey.id}`, { status: 'closed' });
      expect(closed.body.data.status).toBe('closed');
      const after = (await api(owner, 'GET', `/api/surveys/${survey.id}/responses?status=partial`)).body.data
        .data;
      expect(after.map((r: { address: string }) => r.address)).toEqual([english]);
      await settle();
      expect((await api(owner, 'GET', `/api/survey-runs/${started.body.data.id}`)).body.data.status).toBe(
        'completed',
      );

      // One webhook event, for Asha's completed response; the audit log names each step.
      const events = await t.db.kysely
        .selectFrom('webhook_events')
        .select(['type', 'payload'])
        .where('workspace_id', '=', owner.user.workspace_id)
        .execute();
      expect(events.map((e) => e.type)).toEqual(['survey.response.completed']);
      expect(JSON.parse(events[0]!.payload)).toMatchObject({
        survey_id: survey.id,
        address: hindi,
        status: 'completed',
        // `vote` saves to support_level: a sensitive value, which no webhook carries (contract, fifth part).
        answers: { household: 4 },
      });
      expect(JSON.parse(events[0]!.payload).answers).not.toHaveProperty('vote');
      const actions = (await api(owner, 'GET', '/api/audit-log?per_page=100')).body.data.data.map(
        (e: { action: string }) => e.action,
      );
      expect(actions).toEqual(
        expect.arrayContaining(['survey.created', 'survey.run', 'survey.closed', 'voter.updated']),
      );

      // With include_sensitive (a politician's), the support_level question's column is there too.
      const csv = await call(
        t.app,
        'GET',
        `/api/surveys/${survey.id}/responses/export?format=csv&include_sensitive=true`,
        { token: owner.token },
      );
      expect(csv.status).toBe(200);
      const rows = parseCsv(csv.raw);
      expect(rows[0]).toEqual([
        'id',
        'run_id',
        'voter_id',
        'address',
        'channel',
        'language',
        'status',
        'booth',
        'started_at',
        'completed_at',
        'vote',
        'household',
        'problem',
      ]);
      expect(rows).toHaveLength(4);
    });

    it("starts a survey from a keyword, keeps a stranger's answers by address, and ends idle sessions", async () => {
      const owner = await register(t.app);
      const made = await api(owner, 'POST', '/api/surveys', {
        ...opinion,
        status: 'active',
        triggers: [{ channel: 'sms', keyword: 'survey' }],
        questions: [
          {
            key: 'issue',
            type: 'choice',
            text: { en: 'Your issue?' },
            choices: [
              { key: '1', label: { en: 'Roads' } },
              { key: '2', label: { en: 'Water' } },
            ],
            save_to: 'tags',
          },
        ],
      });
      const stranger = uniquePhone();
      const known = uniquePhone();
      const v = await api(owner, 'POST', '/api/voters', { name: 'Known', phone: known });
      await reply(owner, stranger, 'Survey!');
      await reply(owner, known, 'survey');
      await reply(owner, known, 'water');
      await worker.drain();
      expect(await sent(owner, stranger)).toEqual([
        'A short survey from your MLA office.\nYour issue?\n1. Roads\n2. Water',
      ]);
      const voter = (await api(owner, 'GET', `/api/voters/${v.body.data.id}`)).body.data;
      expect(voter.tags).toEqual(['2']);
      // A day later the stranger's session ends unanswered.
      now = new Date(Date.now() + 25 * 3_600_000);
      await runs.round();
      now = new Date();
      const all = (await api(owner, 'GET', `/api/surveys/${made.body.data.id}/responses`)).body.data.data;
      expect(all.map((r: { status: string; voter_id: number | null }) => [r.status, r.voter_id])).toEqual([
        ['completed', v.body.data.id],
        ['no_answer', null],
      ]);
      // The keyword again within a day starts nothing (someone texting it over and over would spend the
      // office's credits one question at a time); a day after their last start, it starts the survey again.
      const questionsTo = async (to: string) =>
        (await sent(owner, to)).filter((m) => m.includes('Your issue?')).length;
      await reply(owner, known, 'survey');
      await reply(owner, stranger, 'SURVEY');
      await worker.drain();
      expect([await questionsTo(known), await questionsTo(stranger)]).toEqual([1, 1]);
      expect((await api(owner, 'GET', `/api/surveys/${made.body.data.id}/responses`)).body.data.total).toBe(
        2,
      );
      await t.db.kysely
        .updateTable('survey_responses')
        .set({ started_at: new Date(Date.now() - 25 * 3_600_000).toISOString() })
        .where('address', '=', known)
        .execute();
      await reply(owner, known, 'survey');
      await worker.drain();
      expect(await questionsTo(known)).toBe(2);
    });

    it("a workspace running a large survey does not hold another workspace's run: each round opens a chunk of each", async () => {
      const big = await register(t.app);
      const small = await register(t.app);
      const ws = big.user.workspace_id;
      await t.db.kysely
        .updateTable('credit_balances')
        .set({ balance: 100_000 })
        .where('workspace_id', '=', ws)
        .execute();
      const stamp = new Date().toISOString();
      const rows = Array.from({ length: 6000 }, (_, i) => ({
        workspace_id: ws,
        name: `Voter ${i}`,
        name_key: `voter ${i}`,
        phone: `+9193${String(i).padStart(8, '0')}`,
        created_at: stamp,
        updated_at: stamp,
      }));
      for (let i = 0; i < rows.length; i += 500)
        await t.db.kysely
          .insertInto('voters')
          .values(rows.slice(i, i + 500))
          .execute();
      const oneQuestion = {
        name: 'One',
        questions: [{ key: 'a', type: 'text', text: { en: 'Your view?' } }],
      };
      const bigSurvey = (await api(big, 'POST', '/api/surveys', oneQuestion)).body.data;
      const smallSurvey = (await api(small, 'POST', '/api/surveys', oneQuestion)).body.data;
      const bigRun = await api(big, 'POST', `/api/surveys/${bigSurvey.id}/runs`, {
        channel: 'sms',
        filters: {},
      });
      expect(bigRun.body.data.recipients).toBe(6000);
      const smallRun = await api(small, 'POST', `/api/surveys/${smallSurvey.id}/runs`, {
        channel: 'sms',
        recipients: [uniquePhone(), uniquePhone()],
      });
      await runs.round();
      const started = async (who: Account, id: string) =>
        (await api(who, 'GET', `/api/survey-runs/${id}`)).body.data.started;
      expect(await started(small, smallRun.body.data.id)).toBe(2);
      expect(await started(big, bigRun.body.data.id)).toBeLessThan(6000);
      while (await runs.round()) {
        /* the rest of the large run */
      }
      expect(await started(big, bigRun.body.data.id)).toBe(6000);
    });

    it("obeys a campaign's rules: a silence period fails its questions there, DLT_ENFORCE wants a template per SMS question", async () => {
      const owner = await register(t.app);
      const inside = uniquePhone();
      const outside = uniquePhone();
      await api(owner, 'POST', '/api/voters', { name: 'Inside', phone: inside, constituency: 'Varanasi' });
      await api(owner, 'POST', '/api/voters', { name: 'Outside', phone: outside, constituency: 'Amethi' });
      const silence = await api(owner, 'POST', '/api/silence-periods', {
        constituency: 'Varanasi',
        starts_at: new Date(Date.now() - 3_600_000).toISOString(),
        ends_at: new Date(Date.now() + 3_600_000).toISOString(),
      });
      expect(silence.status, silence.raw).toBe(201);
      const survey = (await api(owner, 'POST', '/api/surveys', opinion)).body.data;
      await api(owner, 'POST', `/api/surveys/${survey.id}/runs`, {
        channel: 'sms',
        recipients: [inside, outside],
      });
      await settle();
      const history = async (to: string) =>
        (await api(owner, 'GET', `/api/messages/history?to=${encodeURIComponent(to)}`)).body.data.data;
      expect((await history(inside))[0]).toMatchObject({ status: 'failed', error_code: 'silence_period' });
      expect((await history(outside))[0].status).not.toBe('failed');

      const strict = await buildTestApp(dialect, { ...database.env, DLT_ENFORCE: 'true' });
      try {
        const office = await register(strict.app);
        const made = await call(strict.app, 'POST', '/api/surveys', { token: office.token, body: opinion });
        const run = await call(strict.app, 'POST', `/api/surveys/${made.body.data.id}/runs`, {
          token: office.token,
          body: { channel: 'sms', recipients: [uniquePhone()] },
        });
        expectError(run, 422, 'validation_error');
        // Each question, and the outro, lacks the SMS template it would go as.
        expect(Object.keys(run.body.details).sort()).toEqual([
          'outro.templates.sms',
          'questions.0.templates.sms',
          'questions.1.templates.sms',
          'questions.2.templates.sms',
        ]);
        // WhatsApp is not DLT's: the same survey runs there.
        const whatsapp = await call(strict.app, 'POST', `/api/surveys/${made.body.data.id}/runs`, {
          token: office.token,
          body: { channel: 'whatsapp', recipients: [uniquePhone()] },
        });
        expect(whatsapp.status, whatsapp.raw).toBe(202);
      } finally {
        await strict.close();
      }
    });

    it('a session survives a restart: opened by one process, answered by another after the first is gone', async () => {
      const [a, b, done] = await buildTwoApps(dialect, database.env);
      try {
        const office = await register(a.app);
        const phone = uniquePhone();
        const made = await call(a.app, 'POST', '/api/surveys', { token: office.token, body: opinion });
        await call(a.app, 'POST', `/api/surveys/${made.body.data.id}/runs`, {
          token: office.token,
          body: { channel: 'sms', recipients: [phone] },
        });
        await new SurveyRuns({ db: a.db.kysely, sessionHours: 24 }).round();
        await a.close();
        const delivery = new DeliveryWorker({
          db: b.db,
          config: b.config,
          providers: b.providers,
          log: silent,
        });
        for (const body of ['2', '3', 'Roads']) {
          await delivery.drain();
          await call(b.app, 'POST', '/api/inbound', {
            token: office.token,
            body: { channel: 'sms', from: phone, body },
          });
        }
        const responses = await call(b.app, 'GET', `/api/surveys/${made.body.data.id}/responses`, {
          token: office.token,
        });
        expect(responses.body.data.data[0]).toMatchObject({
          status: 'completed',
          answers: { vote: '2', household: 3, problem: 'Roads' },
        });
      } finally {
        await done().catch(() => {});
      }
    });

    it('refuses a run the workspace cannot pay for, and cancels one with its credits back', async () => {
      const owner = await register(t.app);
      const survey = (await api(owner, 'POST', '/api/surveys', opinion)).body.data;
      const before = (await api(owner, 'GET', '/api/user')).body.data.credits;
      const many = Array.from({ length: 3 }, () => uniquePhone());
      const run = await api(owner, 'POST', `/api/surveys/${survey.id}/runs`, {
        channel: 'sms',
        recipients: many,
        scheduled_at: new Date(Date.now() + 3_600_000).toISOString(),
      });
      expect(run.body.data.status).toBe('scheduled');
      const during = (await api(owner, 'GET', '/api/user')).body.data.credits;
      expect(during.sms_credits).toBeLessThan(before.sms_credits);
      const cancelled = await api(owner, 'POST', `/api/survey-runs/${run.body.data.id}/cancel`);
      expect(cancelled.body.data.status).toBe('cancelled');
      expect((await api(owner, 'GET', '/api/user')).body.data.credits.sms_credits).toBe(before.sms_credits);
      expectError(await api(owner, 'POST', `/api/survey-runs/${run.body.data.id}/cancel`), 409, 'conflict');
      // 150 first questions against 100 credits: 402, and nothing reserved or queued.
      const tooMany = await api(owner, 'POST', `/api/surveys/${survey.id}/runs`, {
        channel: 'sms',
        recipients: Array.from({ length: 150 }, () => uniquePhone()),
      });
      expectError(tooMany, 402, 'insufficient_credits');
      expect((await api(owner, 'GET', '/api/user')).body.data.credits.sms_credits).toBe(before.sms_credits);
      expect((await api(owner, 'GET', `/api/surveys/${survey.id}/runs`)).body.data.total).toBe(1);
    });

    it('skips an opted-out address, and exports answers formula-safe', async () => {
      const owner = await register(t.app);
      const stopped = uniquePhone();
      const writer = uniquePhone();
      await api(owner, 'POST', '/api/opt-outs', { address: stopped, channel: 'sms', reason: 'asked' });
      const survey = (
        await api(owner, 'POST', '/api/surveys', {
          name: 'Open question',
          questions: [{ key: 'say', type: 'text', text: { en: 'Anything to tell us?' } }],
        })
      ).body.data;
      const run = await api(owner, 'POST', `/api/surveys/${survey.id}/runs`, {
        channel: 'sms',
        recipients: [stopped, writer],
      });
      await settle();
      expect(await sent(owner, stopped)).toEqual([]);
      await reply(owner, writer, '=HYPERLINK("http://x.example","click")');
      const progress = (await api(owner, 'GET', `/api/survey-runs/${run.body.data.id}`)).body.data;
      expect(progress).toMatchObject({ recipients: 2, started: 1, completed: 1, opted_out: 1 });
      // With include_sensitive (a politician's), the support_level question's column is there too.
      const csv = await call(
        t.app,
        'GET',
        `/api/surveys/${survey.id}/responses/export?format=csv&include_sensitive=true`,
        { token: owner.token },
      );
      const rows = parseCsv(csv.raw);
      expect(rows[1]!.at(-1)).toBe('\'=HYPERLINK("http://x.example","click")');
    });
  });
}
