/**
 * Sending as the gateways require (contract, fifth part): the defects a Varanasi office met with MSG91, Exotel
 * and WhatsApp, each with its regression test.
 * 1. An SMS survey on MSG91 is refused at creation without a DLT template per question; a question the gateway
 *    refuses ends its session `failed` (the run counts it, says why, and ends `failed`); a voter's message
 *    before their question was handed over is their own, not an answer.
 * 2. A reply on MSG91 is a template: free text is 422 naming the templates that fit; a DLT variable is at most
 *    30 characters.
 * 4. A cancel stops the messages a worker had claimed: only the calls in flight go, the rest is refunded.
 * (3, no silent re-routing, is in channel-carriers.test.ts; 5, IVR replays, in survey-ivr.test.ts.)
 */
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { SurveyRuns } from '../src/modules/surveys/survey-runs.ts';
import { type Account, call, dialects, expectError, register, uniquePhone } from './helpers.ts';
import { buildProviderTestApp, isolatedDatabase, until } from './messaging-helpers.ts';
import { createHmac } from 'node:crypto';
import { type Double, fakeMeta, fakeMsg91, META, MSG91_AUTHKEY } from './provider-doubles.ts';

const silent = pino({ level: 'silent' });
const VERSION = 'v23.0';
const PUBLIC = 'https://ces.example.org';

const poll = {
  name: 'Ward poll',
  outro: { en: 'Thank you.' },
  questions: [
    {
      key: 'drain',
      type: 'choice',
      text: { en: 'Is the drain cleared? 1 yes 2 no' },
      choices: [
        { key: '1', label: { en: 'Yes' } },
        { key: '2', label: { en: 'No' } },
      ],
    },
    { key: 'support', type: 'number', text: { en: 'Support, 1 to 5?' }, min: 1, max: 5 },
  ],
};

for (const dialect of dialects) {
  describe(`sending as the gateways require (${dialect})`, () => {
    let msg91: Double;
    let meta: Double;
    let t: Awaited<ReturnType<typeof buildProviderTestApp>>;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    let worker: DeliveryWorker;
    let runs: SurveyRuns;
    beforeAll(async () => {
      msg91 = await fakeMsg91();
      meta = await fakeMeta(VERSION);
      database = await isolatedDatabase(dialect);
      t = await buildProviderTestApp(dialect, {
        ...database.env,
        PUBLIC_BASE_URL: PUBLIC,
        WHATSAPP_CLOUD_BASE_URL: meta.url,
        WHATSAPP_CLOUD_API_VERSION: VERSION,
        MSG91_BASE_URL: msg91.url,
        SANDBOX_DELIVERY_DELAY_MS: '0',
      });
      worker = new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent });
      runs = new SurveyRuns({ db: t.db.kysely, sessionHours: 24 });
    }, 60_000);
    afterAll(async () => {
      await t?.close();
      await database?.drop();
      await msg91?.close();
      await meta?.close();
    });

    const api = (who: Account, method: string, url: string, body?: unknown) =>
      call(t.app, method as 'GET', url, { token: who.token, ...(body !== undefined ? { body } : {}) });
    const settle = async () => {
      while (await runs.round()) {
        /* open sessions, complete runs */
      }
      await worker.drain();
      while (await runs.round()) {
        /* complete what the drain ended */
      }
    };
    const msg91Account = (owner: Account, authkey = MSG91_AUTHKEY) =>
      api(owner, 'POST', '/api/channel-accounts', {
        name: 'MSG91',
        provider: 'msg91',
        settings: { sender: 'CESOFC' },
        credentials: { authkey },
      });
    const template = async (owner: Account, name: string, body: string, flow = `flow_${name}`) =>
      (
        await api(owner, 'POST', '/api/templates', {
          name,
          channel: 'sms',
          body,
          provider_template_ids: { msg91: flow },
        })
      ).body.data.id as string;
    const withTemplates = (q1: string, q2: string, outro: string) => ({
      ...poll,
      outro: { ...poll.outro, templates: { sms: outro } },
      questions: [
        { ...poll.questions[0], templates: { sms: q1 } },
        { ...poll.questions[1], templates: { sms: q2 } },
      ],
    });

    it('an MSG91 survey needs a DLT template per question, says so at creation, and sends each as its template', async () => {
      const owner = await register(t.app);
      expect((await msg91Account(owner)).status).toBe(201);
      const ws = (await api(owner, 'GET', '/api/workspace')).body.data;
      expect(ws.channels.sms).toMatchObject({ provider: 'msg91', templates_only: true });
      const plain = (await api(owner, 'POST', '/api/surveys', poll)).body.data;
      const refused = await api(owner, 'POST', `/api/surveys/${plain.id}/runs`, {
        channel: 'sms',
        recipients: [uniquePhone()],
      });
      expectError(refused, 422, 'validation_error');
      expect(Object.keys(refused.body.details).sort()).toEqual([
        'outro.templates.sms',
        'questions.0.templates.sms',
        'questions.1.templates.sms',
      ]);
      expect(refused.body.details['questions.0.templates.sms'][0]).toContain('MSG91');
      // Nothing was sent, and no run was made.
      expect((await api(owner, 'GET', `/api/surveys/${plain.id}/runs`)).body.data.total).toBe(0);

      const q1 = await template(owner, 'q1', 'Is the drain cleared? 1 yes 2 no -CESOFC');
      const q2 = await template(owner, 'q2', 'Support, 1 to 5? -CESOFC');
      const bye = await template(owner, 'bye', 'Thank you. -CESOFC');
      const survey = (await api(owner, 'POST', '/api/surveys', withTemplates(q1, q2, bye))).body.data;
      expect(survey.questions[0].templates).toEqual({ sms: q1 });
      expect(survey.outro).toEqual({ en: 'Thank you.', templates: { sms: bye } });
      const phone = uniquePhone();
      const run = await api(owner, 'POST', `/api/surveys/${survey.id}/runs`, {
        channel: 'sms',
        recipients: [phone],
      });
      expect(run.status, run.raw).toBe(202);
      while (await runs.round()) {
        /* open the session */
      }
      // Before the question is handed over, the voter's complaint is their own message, not an answer.
      const complaint = await api(owner, 'POST', '/api/inbound', {
        channel: 'sms',
        from: phone,
        body: 'नाली अभी भी बंद है, कब साफ होगी?',
      });
      expect(complaint.status, complaint.raw).toBeLessThan(300);
      const early = (await api(owner, 'GET', `/api/surveys/${survey.id}/responses`)).body.data.data[0];
      expect(early).toMatchObject({ status: 'open', answers: {} });
      await worker.drain();
      const flows = () =>
        msg91.requests
          .filter(
            (r) =>
              (r.json as { recipients?: Array<{ mobiles: string }> }).recipients?.[0]?.mobiles ===
              phone.slice(1),
          )
          .map((r) => (r.json as { template_id: string }).template_id);
      expect(flows()).toEqual(['flow_q1']);
      for (const answer of ['1', '4']) {
        await api(owner, 'POST', '/api/inbound', { channel: 'sms', from: phone, body: answer });
        await worker.drain();
      }
      expect(flows()).toEqual(['flow_q1', 'flow_q2', 'flow_bye']);
      const done = (await api(owner, 'GET', `/api/surveys/${survey.id}/responses`)).body.data.data[0];
      expect(done).toMatchObject({ status: 'completed', answers: { drain: '1', support: 4 } });
    });

    it('a question the gateway refuses ends its session failed, and the run says so and why', async () => {
      const owner = await register(t.app);
      // The key MSG91 refuses (code 207): every question is refused.
      expect((await msg91Account(owner, 'msg91-key-that-msg91-refuses')).status).toBe(201);
      const q1 = await template(owner, 'q1', 'Is the drain cleared? -CESOFC');
      const q2 = await template(owner, 'q2', 'Support? -CESOFC');
      const bye = await template(owner, 'bye', 'Thanks -CESOFC');
      const survey = (await api(owner, 'POST', '/api/surveys', withTemplates(q1, q2, bye))).body.data;
      const phones = [uniquePhone(), uniquePhone(), uniquePhone()];
      const run = (
        await api(owner, 'POST', `/api/surveys/${survey.id}/runs`, { channel: 'sms', recipients: phones })
      ).body.data;
      await settle();
      const after = (await api(owner, 'GET', `/api/survey-runs/${run.id}`)).body.data;
      expect(after).toMatchObject({ status: 'failed', failed: 3, open: 0, completed: 0 });
      expect(after.last_error).toMatchObject({ error_code: 'auth_failed' });
      expect(after.last_error.error_message).toContain('207');
      const responses = (await api(owner, 'GET', `/api/surveys/${survey.id}/responses?status=failed`)).body
        .data;
      expect(responses.total).toBe(3);
      // The voter's next message is not taken for an answer, and no "did not understand" is queued.
      const before = msg91.requests.length;
      await api(owner, 'POST', '/api/inbound', {
        channel: 'sms',
        from: phones[0],
        body: 'नाली कब साफ होगी?',
      });
      const history = (await api(owner, 'GET', `/api/messages/history?to=${encodeURIComponent(phones[0]!)}`))
        .body.data.data;
      expect(history).toHaveLength(1);
      expect(history[0]).toMatchObject({ status: 'failed', error_code: 'auth_failed' });
      expect(msg91.requests.length).toBe(before);
    });

    it("a WhatsApp survey opens with the first question's approved template, whose button answers it; a refusal fails the session", async () => {
      const owner = await register(t.app);
      const account = (
        await api(owner, 'POST', '/api/channel-accounts', {
          name: 'WhatsApp',
          provider: 'whatsapp_cloud',
          settings: { phone_number_id: META.phoneNumberId, waba_id: '102290129340398' },
          credentials: { access_token: META.accessToken, app_secret: META.appSecret },
        })
      ).body.data;
      expect(account.templates_only).toBe(true);
      const plain = (await api(owner, 'POST', '/api/surveys', poll)).body.data;
      const refused = await api(owner, 'POST', `/api/surveys/${plain.id}/runs`, {
        channel: 'whatsapp',
        recipients: [uniquePhone()],
      });
      expectError(refused, 422, 'validation_error');
      expect(Object.keys(refused.body.details)).toEqual(['questions.0.templates.whatsapp']);
      const opener = (
        await api(owner, 'POST', '/api/templates', {
          name: 'Drain poll',
          channel: 'whatsapp',
          language: 'hi',
          category: 'service',
          body: 'Namaste {{name}}, is the drain in your street cleared?',
          provider_template_ids: { whatsapp_cloud: 'drain_poll' },
        })
      ).body.data.id as string;
      // The account's test send is a template too: free text would be Meta's 131047.
      const testUrl = `/api/channel-accounts/${account.id}/test`;
      expectError(await api(owner, 'POST', testUrl, { to: uniquePhone() }), 422, 'validation_error');
      const tested = await api(owner, 'POST', testUrl, { to: uniquePhone(), template_id: opener });
      expect(tested.status, tested.raw).toBe(200);
      const survey = (
        await api(owner, 'POST', '/api/surveys', {
          ...poll,
          questions: [{ ...poll.questions[0], templates: { whatsapp: opener } }, poll.questions[1]],
        })
      ).body.data;
      const phone = uniquePhone();
      await api(owner, 'POST', '/api/voters', { name: 'Shanti Devi', phone });
      const run = (
        await api(owner, 'POST', `/api/surveys/${survey.id}/runs`, {
          channel: 'whatsapp',
          recipients: [phone],
        })
      ).body.data;
      await settle();
      const toVoter = () => meta.requests.filter((r) => (r.json as { to?: string }).to === phone.slice(1));
      expect(toVoter().map((r) => (r.json as { type: string }).type)).toEqual(['template']);
      expect(toVoter()[0]!.json).toMatchObject({
        template: { name: 'drain_poll', components: [{ parameters: [{ text: 'Shanti Devi' }] }] },
      });
      // The voter taps the template's quick-reply button "Yes" (Meta's `button` message).
      const notify = (value: Record<string, unknown>) => {
        const raw = JSON.stringify({
          object: 'whatsapp_business_account',
          entry: [
            {
              id: '102290129340398',
              changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', ...value } }],
            },
          ],
        });
        return call(t.app, 'POST', new URL(account.callback_urls.webhook).pathname, {
          body: raw,
          headers: {
            'content-type': 'application/json',
            'x-hub-signature-256': `sha256=${createHmac('sha256', META.appSecret).update(raw).digest('hex')}`,
          },
        });
      };
      const tapped = await notify({
        contacts: [{ profile: { name: 'Shanti' }, wa_id: phone.slice(1) }],
        messages: [
          {
            from: phone.slice(1),
            id: `wamid.tap${Date.now()}`,
            timestamp: '1764093000',
            type: 'button',
            button: { payload: 'Yes', text: 'Yes' },
          },
        ],
      });
      expect(tapped.status, tapped.raw).toBe(200);
      await worker.drain();
      // The next question goes as text, inside the window the answer opened.
      expect(toVoter().map((r) => (r.json as { type: string }).type)).toEqual(['template', 'text']);
      const second = await t.db.kysely
        .selectFrom('messages')
        .select('provider_message_id')
        .where('to', '=', phone)
        .orderBy('id', 'desc')
        .executeTakeFirstOrThrow();
      // Meta reports it failed (131047): the session ends failed, and the run says why.
      const failed = await notify({
        statuses: [
          {
            id: second.provider_message_id,
            status: 'failed',
            timestamp: '1764093100',
            recipient_id: phone.slice(1),
            errors: [{ code: 131047, title: 'Re-engagement message' }],
          },
        ],
      });
      expect(failed.status, failed.raw).toBe(200);
      const response = (await api(owner, 'GET', `/api/surveys/${survey.id}/responses`)).body.data.data[0];
      expect(response).toMatchObject({ status: 'failed', answers: { drain: '1' } });
      const after = (await api(owner, 'GET', `/api/survey-runs/${run.id}`)).body.data;
      expect(after).toMatchObject({ failed: 1, last_error: { error_code: 'outside_session' } });
    });

    it('a reply on MSG91 is a template with its variables: free text names the templates that fit', async () => {
      const owner = await register(t.app);
      const account = (await msg91Account(owner)).body.data;
      expect(account.templates_only).toBe(true);
      const fit = await template(
        owner,
        'Reply',
        'Dear {{name}}, your complaint about {{ward}} is noted. -CESOFC',
      );
      // A template MSG91 does not know (no provider id) is not offered.
      await api(owner, 'POST', '/api/templates', { name: 'Plain', channel: 'sms', body: 'Hello' });
      const phone = uniquePhone();
      await api(owner, 'POST', '/api/inbound', { channel: 'sms', from: phone, body: 'नाली बंद है' });
      const conversation = (await api(owner, 'GET', '/api/conversations')).body.data.data.find(
        (c: { address: string }) => c.address === phone,
      );
      const free = await api(owner, 'POST', `/api/conversations/${conversation.id}/reply`, {
        message: 'We are on it',
      });
      expectError(free, 422, 'validation_error');
      expect(free.body.details.message[0]).toContain(fit);
      expect(free.body.details.message[0]).not.toContain('Plain');
      const long = await api(owner, 'POST', `/api/conversations/${conversation.id}/reply`, {
        template_id: fit,
        variables: { name: 'Shanti', ward: 'Ward 12, Lanka, near the Assi ghat road' },
      });
      expectError(long, 422, 'validation_error');
      expect(Object.keys(long.body.details)).toEqual(['variables.ward']);
      const ok = await api(owner, 'POST', `/api/conversations/${conversation.id}/reply`, {
        template_id: fit,
        variables: { name: 'Shanti', ward: 'Ward 12' },
      });
      expect(ok.status, ok.raw).toBeLessThan(300);
      const sent = msg91.requests.at(-1)!.json as {
        template_id: string;
        recipients: Array<Record<string, string>>;
      };
      expect(sent.template_id).toBe('flow_Reply');
      expect(sent.recipients[0]).toMatchObject({ mobiles: phone.slice(1) });
      expect(Object.values(sent.recipients[0]!)).toEqual(expect.arrayContaining(['Shanti', 'Ward 12']));
    });
  });
}

/**
 * Cancel stops (contract, fifth part): a paced account (20 a second) with 200 recipients, cancelled after a
 * second while workers send (two on PostgreSQL). When the cancel commits, at most the calls in flight still go;
 * every other message ends `failed`/`cancelled` and its credit comes back.
 */
for (const dialect of dialects) {
  describe(`a cancel stops what workers claimed (${dialect})`, () => {
    it('hands over nothing after the cancel but the calls in flight, and refunds the rest', async () => {
      const database = await isolatedDatabase(dialect);
      const t = await buildProviderTestApp(dialect, {
        ...database.env,
        SANDBOX_DELIVERY_DELAY_MS: '0',
        WORKER_POLL_MS: '20',
      });
      const workers = Array.from(
        { length: dialect === 'postgres' ? 2 : 1 },
        () => new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent }),
      );
      try {
        const owner = await register(t.app);
        const api = (method: string, url: string, body?: unknown) =>
          call(t.app, method as 'GET', url, { token: owner.token, ...(body !== undefined ? { body } : {}) });
        const account = await api('POST', '/api/channel-accounts', {
          name: 'Paced',
          provider: 'sandbox',
          channels: ['sms'],
          default_for: ['sms'],
          send_rate_per_second: 20,
        });
        expect(account.status, account.raw).toBe(201);
        const ws = (await api('GET', '/api/workspace')).body.data.id as number;
        await t.db.kysely
          .updateTable('credit_balances')
          .set({ balance: 1000 })
          .where('workspace_id', '=', ws)
          .where('channel', '=', 'sms')
          .execute();
        const credits = async () => (await api('GET', '/api/user')).body.data.credits.sms_credits as number;
        const recipients = Array.from({ length: 200 }, () => uniquePhone());
        const broadcast = await api('POST', '/api/messages/broadcast', {
          channel: 'sms',
          message: 'Rally at the ghat at 5',
          recipients,
        });
        expect(broadcast.status, broadcast.raw).toBe(202);
        const id = broadcast.body.data.campaign_id as string;
        for (const w of workers) w.start();
        await until(
          async () => (await api('GET', `/api/campaigns/${id}`)).body.data.stats.queued < 200,
          'the workers to start sending',
        );
        await new Promise((resolve) => setTimeout(resolve, 1000));
        const cancel = await api('POST', `/api/campaigns/${id}/cancel`);
        expect(cancel.status, cancel.raw).toBe(200);
        const { in_flight: inFlight, stats } = cancel.body.data;
        // At most one call per account lane: one lane in each worker.
        expect(inFlight).toBeLessThanOrEqual(workers.length);
        const handedAtCancel = stats.sent + stats.delivered;
        expect(handedAtCancel).toBeGreaterThan(0);
        expect(handedAtCancel).toBeLessThan(200);
        await until(
          async () => (await api('GET', `/api/campaigns/${id}`)).body.data.stats.queued === 0,
          'the in-flight calls to be recorded',
        );
        // Give a worker that ignored the cancel every chance to send more: it must not.
        await new Promise((resolve) => setTimeout(resolve, 500));
        const final = (await api('GET', `/api/campaigns/${id}`)).body.data.stats;
        const handed = final.sent + final.delivered;
        expect(handed).toBeGreaterThanOrEqual(handedAtCancel);
        expect(handed).toBeLessThanOrEqual(handedAtCancel + inFlight);
        const messages = await t.db.kysely
          .selectFrom('messages')
          .select(['status', 'error_code'])
          .where('campaign_id', '=', Number(id.slice(5)))
          .execute();
        const failed = messages.filter((m) => m.status === 'failed');
        expect(failed.length).toBe(200 - handed);
        expect(failed.every((m) => m.error_code === 'cancelled')).toBe(true);
        // Credits: only the messages handed over are spent.
        expect(await credits()).toBe(1000 - handed);
      } finally {
        for (const w of workers) await w.stop();
        await t.close();
        await database.drop();
      }
    }, 60_000);
  });
}
