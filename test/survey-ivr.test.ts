import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { SurveyRuns } from '../src/modules/surveys/survey-runs.ts';
import { type Account, call, dialects, expectError, register, uniquePhone } from './helpers.ts';
import { buildProviderTestApp, isolatedDatabase } from './messaging-helpers.ts';
import { EXOTEL, fakeExotel, type Double, type Recorded } from './provider-doubles.ts';

/**
 * IVR surveys through Exotel's flows (contract, fourth part, "Surveys: ask voters on every channel"). The real
 * Exotel adapter places the call (Calls/connect.json with the survey flow's URL and our message id in
 * CustomField); the test then plays the call as Exotel's flow would, requesting our URLs in order:
 * - the Gather applet's dynamic URL (GET, header `Exotel-Version: 1.0`, query CallSid, CallFrom, CallTo,
 *   CallStatus, Direction, CustomField), which answers JSON `{ gather_prompt: { text | audio_url },
 *   max_input_digits, finish_on_key, input_timeout, repeat_menu, repeat_gather_prompt }`
 *   (https://support.exotel.com/support/solutions/articles/3000084635-working-with-gather-applet);
 * - the Passthru applet after it (GET, the same parameters and `digits` wrapped in double quotes, `"2"`), whose
 *   200 sends the flow back to the Gather and 302 on to its goodbye
 *   (https://support.exotel.com/support/solutions/articles/48283-working-with-passthru-applet);
 * - the incoming flow's Passthru for a missed call to the ExoPhone (CallFrom in national form, 0XXXXXXXXXX).
 */
const PUBLIC = 'https://ces.example.org';
const pathOf = (url: string) => new URL(url).pathname + new URL(url).search;
const national = (phone: string) => `0${phone.slice(3)}`;

for (const dialect of dialects) {
  describe(`IVR surveys through Exotel (${dialect})`, () => {
    let exotel: Double;
    let t: Awaited<ReturnType<typeof buildProviderTestApp>>;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    let worker: DeliveryWorker;
    let runs: SurveyRuns;
    beforeAll(async () => {
      exotel = await fakeExotel();
      database = await isolatedDatabase(dialect);
      t = await buildProviderTestApp(dialect, {
        ...database.env,
        PUBLIC_BASE_URL: PUBLIC,
        EXOTEL_BASE_URL: exotel.url,
      });
      const log = pino({ level: 'silent' });
      worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log });
      runs = new SurveyRuns({ db: t.db.kysely, sessionHours: 24 });
    }, 60_000);
    afterAll(async () => {
      await t?.close();
      await database?.drop();
      await exotel?.close();
    });

    const api = (who: Account, method: string, url: string, body?: unknown) =>
      call(t.app, method as 'GET', url, { token: who.token, ...(body !== undefined ? { body } : {}) });

    /** An Exotel account with a survey call flow, the workspace's carrier for SMS and IVR. */
    const surveyAccount = async (owner: Account) =>
      (
        await api(owner, 'POST', '/api/channel-accounts', {
          name: 'Exotel',
          provider: 'exotel',
          settings: {
            sid: EXOTEL.sid,
            sender: 'CESOFC',
            caller_id: '08047112345',
            app_id: '512345',
            survey_flow_app_id: '612345',
          },
          credentials: { api_key: EXOTEL.apiKey, api_token: EXOTEL.apiToken },
          default_for: ['sms', 'ivr'],
        })
      ).body.data;

    /** Exotel's request to one of our flow URLs, as its applets make it. */
    const applet = (url: string, query: Record<string, string>) =>
      call(t.app, 'GET', `${pathOf(url)}?${new URLSearchParams(query)}`, {
        headers: { 'exotel-version': '1.0' },
      });

    /** Plays a placed call through the flow: Gather, then Passthru with each key in turn; the answers seen. */
    async function playCall(who: Account, urls: Record<string, string>, placed: Recorded, keys: string[]) {
      // The call's Sid, as Exotel answered Calls/connect (the message keeps it as the provider's id).
      const callSid = (await api(who, 'GET', `/api/messages/${placed.form.CustomField}`)).body.data
        .provider_message_id as string;
      const common = {
        CallSid: callSid,
        CallFrom: placed.form.CallerId!,
        CallTo: placed.form.From!,
        CallStatus: 'in-progress',
        Direction: 'outbound-api',
        CustomField: placed.form.CustomField!,
      };
      const prompts: Array<Record<string, unknown>> = [];
      const passthru: number[] = [];
      for (const key of keys) {
        const gather = await applet(urls.survey_gather!, common);
        expect(gather.status, gather.raw).toBe(200);
        expect(gather.headers['content-type']).toMatch(/^application\/json/);
        prompts.push(gather.body);
        const answer = await applet(urls.survey_answer!, { ...common, digits: `"${key}"` });
        passthru.push(answer.status);
        if (answer.status === 302) break;
      }
      return { prompts, passthru };
    }

    it("places the survey call through the survey flow, speaks each question in the voter's language, takes the keys, saves them", async () => {
      const owner = await register(t.app);
      const account = await surveyAccount(owner);
      expect(Object.keys(account.callback_urls)).toEqual(
        expect.arrayContaining(['survey_gather', 'survey_answer', 'missed_call']),
      );
      const phone = uniquePhone();
      const voter = (await api(owner, 'POST', '/api/voters', { name: 'Ravi', phone, language: 'hi' })).body
        .data;
      const survey = (
        await api(owner, 'POST', '/api/surveys', {
          name: 'Phone poll',
          intro: { en: 'Namaste.', hi: 'नमस्ते।' },
          questions: [
            {
              key: 'issue',
              type: 'choice',
              text: { en: 'Biggest issue?', hi: 'सबसे बड़ी समस्या?' },
              choices: [
                { key: '1', label: { en: 'Roads', hi: 'सड़क' } },
                { key: '2', label: { en: 'Water', hi: 'पानी' } },
              ],
              save_to: 'tags',
            },
            {
              key: 'voters',
              type: 'number',
              text: { en: 'Voters at home?' },
              min: 1,
              max: 20,
              audio_url: 'https://cdn.example.org/q2.mp3',
            },
          ],
        })
      ).body.data;
      const run = await api(owner, 'POST', `/api/surveys/${survey.id}/runs`, {
        channel: 'ivr',
        recipients: [phone],
      });
      expect(run.status, run.raw).toBe(202);
      while (await runs.round()) {
        /* open the sessions */
      }
      await worker.drain();
      const placed = exotel.requests.find(
        (r) => r.path.endsWith('/Calls/connect.json') && r.form.From === phone,
      )!;
      expect(placed.form.Url).toBe(`http://my.exotel.com/${EXOTEL.sid}/exoml/start_voice/612345`);
      expect(placed.form.CustomField).toMatch(/^msg_\d+$/);

      // A key that is no choice is asked again (retries 2), then 2 (water), then 25 (out of range, asked again), then 4.
      const played = await playCall(owner, account.callback_urls, placed, ['7', '2', '25', '4']);
      expect(played.passthru).toEqual([200, 200, 200, 302]);
      expect(played.prompts[0]).toEqual({
        gather_prompt: { text: 'नमस्ते। सबसे बड़ी समस्या? सड़क: दबाएँ 1. पानी: दबाएँ 2.' },
        max_input_digits: 1,
        finish_on_key: '#',
        input_timeout: 6,
        repeat_menu: 1,
        repeat_gather_prompt: { text: 'नमस्ते। सबसे बड़ी समस्या? सड़क: दबाएँ 1. पानी: दबाएँ 2.' },
      });
      expect(played.prompts[2]).toMatchObject({
        gather_prompt: { audio_url: 'https://cdn.example.org/q2.mp3' },
        max_input_digits: 2,
      });

      const responses = (await api(owner, 'GET', `/api/surveys/${survey.id}/responses`)).body.data.data;
      expect(responses[0]).toMatchObject({
        channel: 'ivr',
        status: 'completed',
        voter_id: voter.id,
        answers: { issue: '2', voters: 4 },
      });
      expect((await api(owner, 'GET', `/api/voters/${voter.id}`)).body.data.tags).toEqual(['2']);

      // A request for a call that is not this account's survey call is 404; a wrong token is 401.
      const stranger = await applet(account.callback_urls.survey_gather, {
        CallSid: 'x',
        CustomField: 'msg_999999',
      });
      expectError(stranger, 404, 'not_found');
      const forged = await applet(
        account.callback_urls.survey_gather.replace(/\/[^/]+\/survey_gather$/, '/wrong-token/survey_gather'),
        {},
      );
      expectError(forged, 401, 'unauthorized');
    });

    it("a Passthru answers only the question its Gather asked, once; a step without the call's CallSid is refused", async () => {
      const owner = await register(t.app);
      const account = await surveyAccount(owner);
      const phone = uniquePhone();
      const survey = (
        await api(owner, 'POST', '/api/surveys', {
          name: 'Caste and support',
          questions: [
            {
              key: 'support',
              type: 'number',
              text: { en: 'Support, 1 to 5?' },
              min: 1,
              max: 5,
            },
            {
              key: 'community',
              type: 'choice',
              text: { en: 'Community?' },
              choices: [
                { key: '1', label: { en: 'General' } },
                { key: '2', label: { en: 'SC' } },
              ],
            },
          ],
        })
      ).body.data;
      await api(owner, 'POST', `/api/surveys/${survey.id}/runs`, { channel: 'ivr', recipients: [phone] });
      while (await runs.round()) {
        /* open the session */
      }
      await worker.drain();
      const placed = exotel.requests.find(
        (r) => r.path.endsWith('/Calls/connect.json') && r.form.From === phone,
      )!;
      const callSid = (await api(owner, 'GET', `/api/messages/${placed.form.CustomField}`)).body.data
        .provider_message_id as string;
      const common = { CallSid: callSid, CustomField: placed.form.CustomField!, CallStatus: 'in-progress' };
      const urls = account.callback_urls as Record<string, string>;
      // Without the call's own CallSid, neither step is taken: the message id alone is sequential.
      const { CallSid: _sid, ...anonymous } = common;
      expectError(await applet(urls.survey_gather!, anonymous), 403, 'forbidden');
      expectError(await applet(urls.survey_answer!, { ...anonymous, digits: '"4"' }), 403, 'forbidden');
      expectError(
        await applet(urls.survey_answer!, { ...common, CallSid: 'CA-forged', digits: '"4"' }),
        404,
        'not_found',
      );
      // A Passthru with no Gather before it answers nothing.
      expect((await applet(urls.survey_answer!, { ...common, digits: '"4"' })).status).toBe(200);
      const answers = async () =>
        (await api(owner, 'GET', `/api/surveys/${survey.id}/responses`)).body.data.data[0].answers;
      expect(await answers()).toEqual({});
      expect((await applet(urls.survey_gather!, common)).status).toBe(200);
      expect((await applet(urls.survey_answer!, { ...common, digits: '"4"' })).status).toBe(200);
      // The same Passthru again (a replay) changes nothing: the next question was not asked yet.
      expect((await applet(urls.survey_answer!, { ...common, digits: '"1"' })).status).toBe(200);
      expect(await answers()).toEqual({ support: 4 });
      expect((await applet(urls.survey_gather!, common)).status).toBe(200);
      expect((await applet(urls.survey_answer!, { ...common, digits: '"2"' })).status).toBe(302);
      expect((await applet(urls.survey_answer!, { ...common, digits: '"1"' })).status).toBe(302);
      expect(await answers()).toEqual({ support: 4, community: '2' });
    });

    it('a missed call to the ExoPhone starts the survey for the caller by SMS, once while it is open and once a day', async () => {
      const owner = await register(t.app);
      const account = (
        await api(owner, 'POST', '/api/channel-accounts', {
          name: 'Exotel',
          provider: 'exotel',
          settings: { sid: EXOTEL.sid, sender: 'CESOFC', caller_id: '08047112345', app_id: '512345' },
          credentials: { api_key: EXOTEL.apiKey, api_token: EXOTEL.apiToken },
          default_for: ['sms', 'ivr'],
        })
      ).body.data;
      const survey = await api(owner, 'POST', '/api/surveys', {
        name: 'Missed call drive',
        status: 'active',
        triggers: [{ missed_call: true, channel_account_id: account.id, reply_channel: 'sms' }],
        questions: [
          {
            key: 'join',
            type: 'choice',
            text: { en: 'Join as a member?' },
            choices: [
              { key: '1', label: { en: 'Yes' } },
              { key: '2', label: { en: 'No' } },
            ],
          },
        ],
      });
      expect(survey.status, survey.raw).toBe(201);
      const caller = uniquePhone();
      const missed = {
        CallSid: 'in-1',
        CallFrom: national(caller),
        CallTo: '08047112345',
        Direction: 'incoming',
      };
      const first = await applet(account.callback_urls.missed_call, missed);
      expect([first.status, first.raw]).toEqual([200, 'started']);
      const again = await applet(account.callback_urls.missed_call, { ...missed, CallSid: 'in-2' });
      expect([again.status, again.raw]).toEqual([200, 'ignored']);
      await worker.drain();
      const sms = exotel.requests.filter((r) => r.path.endsWith('/Sms/send.json') && r.form.To === caller);
      expect(sms.map((r) => r.form.Body)).toEqual(['Join as a member?\n1. Yes\n2. No']);
      const responses = (await api(owner, 'GET', `/api/surveys/${survey.body.data.id}/responses`)).body.data
        .data;
      expect(responses).toMatchObject([{ address: caller, channel: 'sms', status: 'open', run_id: null }]);
      // Once the session has ended, calls within a day start nothing (each would spend a question's credit);
      // a day after the last start, a call starts the survey again.
      const mine = t.db.kysely.updateTable('survey_responses').where('address', '=', caller);
      await mine.set({ status: 'no_answer' }).execute();
      const later = await applet(account.callback_urls.missed_call, { ...missed, CallSid: 'in-3' });
      expect([later.status, later.raw]).toEqual([200, 'ignored']);
      await mine.set({ started_at: new Date(Date.now() - 25 * 3_600_000).toISOString() }).execute();
      const nextDay = await applet(account.callback_urls.missed_call, { ...missed, CallSid: 'in-4' });
      expect([nextDay.status, nextDay.raw]).toEqual([200, 'started']);
    });

    it('a survey call not answered ends its session at once (no_answer), not a day later', async () => {
      const owner = await register(t.app);
      const account = await surveyAccount(owner);
      const phone = uniquePhone();
      const survey = (
        await api(owner, 'POST', '/api/surveys', {
          name: 'Unanswered',
          questions: [{ key: 'a', type: 'number', text: { en: 'How many?' }, min: 1, max: 9 }],
        })
      ).body.data;
      const run = await api(owner, 'POST', `/api/surveys/${survey.id}/runs`, {
        channel: 'ivr',
        recipients: [phone],
      });
      expect(run.status, run.raw).toBe(202);
      while (await runs.round()) {
        /* open the sessions */
      }
      await worker.drain();
      const placed = exotel.requests.find(
        (r) => r.path.endsWith('/Calls/connect.json') && r.form.From === phone,
      )!;
      const callSid = (await api(owner, 'GET', `/api/messages/${placed.form.CustomField}`)).body.data
        .provider_message_id as string;
      const open = (await api(owner, 'GET', `/api/surveys/${survey.id}/responses`)).body.data.data;
      expect(open).toMatchObject([{ channel: 'ivr', status: 'open', completed_at: null }]);

      // Exotel's status callback for the call: nobody picked up.
      const status = await call(t.app, 'POST', pathOf(account.callback_urls.call_status), {
        body: new URLSearchParams({
          CallSid: callSid,
          Status: 'no-answer',
          CustomField: placed.form.CustomField!,
        }).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expect(status.status, status.raw).toBe(200);
      const ended = (await api(owner, 'GET', `/api/surveys/${survey.id}/responses`)).body.data.data;
      expect(ended).toMatchObject([{ channel: 'ivr', status: 'no_answer' }]);
      expect(ended[0].completed_at).toEqual(expect.any(String));
      expect((await api(owner, 'GET', `/api/messages/${placed.form.CustomField}`)).body.data.status).toBe(
        'failed',
      );
    });

    it('refuses an IVR run without an Exotel account that has a survey flow', async () => {
      const owner = await register(t.app);
      const survey = (
        await api(owner, 'POST', '/api/surveys', {
          name: 'x',
          questions: [{ key: 'a', type: 'text', text: { en: 'x' } }],
        })
      ).body.data;
      const run = await api(owner, 'POST', `/api/surveys/${survey.id}/runs`, {
        channel: 'ivr',
        recipients: [uniquePhone()],
      });
      expectError(run, 422, 'validation_error');
      expect(run.body.details.channel_account_id[0]).toMatch(/survey call flows/);
    });
  });
}
