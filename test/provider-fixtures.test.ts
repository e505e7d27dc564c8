import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallbackRefused, type CallbackRequest, fieldsOf } from '../src/providers/adapter.ts';
import { ProviderError } from '../src/providers/provider.ts';
import { adapterOf, adapters } from '../src/providers/registry.ts';
import { twilioSignature } from '../src/providers/twilio/index.ts';

/**
 * Each provider's error table, answers and callbacks against the provider's own words: the cases in
 * test/fixtures/providers/<name>/cases.json are copied from its documentation (each file cites its pages), and
 * each is run through the real adapter: its answers from a local HTTP server in the provider's wire format, its
 * error codes through the adapter's table, its callbacks through the adapter's reading.
 */

interface Expectation {
  error_code: string;
  retry: boolean;
  after_ms?: number;
}
interface AnswerCase extends Partial<Expectation> {
  note: string;
  status: number;
  headers?: Record<string, string>;
  body: unknown;
  sent?: string;
  /** Text of the answer that must not reach error_message (a number, an account id). */
  redacted?: string;
}
interface ErrorCase extends Expectation {
  note: string;
  status: number;
  code?: string;
  text?: string;
}
interface CallbackCase {
  note: string;
  kind: CallbackRequest['kind'];
  method: 'GET' | 'POST';
  form?: boolean;
  signed?: true | 'wrong';
  query?: Record<string, string>;
  body?: unknown;
  refused?: true;
  reports?: Array<{
    providerMessageId?: string;
    to?: string;
    messageRef?: string;
    status?: string;
    error_code?: string;
    optOut?: boolean;
  }>;
  replies?: Array<Record<string, string>>;
  answer?: { type: string; body: string };
  speak?: { messageRef: string; callId: string };
}
interface Cases {
  sources: Record<string, string>;
  answers?: AnswerCase[];
  errors: ErrorCase[];
  callbacks?: CallbackCase[];
}

const fixtures = new URL('./fixtures/providers/', import.meta.url);
const casesOf = (name: string): Cases =>
  JSON.parse(readFileSync(new URL(`${name}/cases.json`, fixtures), 'utf8')) as Cases;

/** An account of each provider, as the adapter is given it. */
const accounts: Record<string, { settings: Record<string, string>; credentials: Record<string, string> }> = {
  msg91: { settings: { sender: 'CESOFC' }, credentials: { authkey: 'key' } },
  exotel: { settings: { sid: 'ces', sender: 'CESOFC' }, credentials: { api_key: 'k', api_token: 't' } },
  whatsapp_cloud: {
    settings: { phone_number_id: '106540352242922' },
    credentials: { access_token: 'token', app_secret: 'APPSECRET' },
  },
  twilio: {
    settings: { account_sid: 'AC0123456789abcdef0123456789abcdef', sms_from: '+15005550006' },
    credentials: { auth_token: 'AUTHTOKEN' },
  },
};
const PUBLIC = 'https://ces.example.org';

/** The providers with an HTTP API and callbacks, and the one without (its table only). */
const withFixtures = ['msg91', 'exotel', 'whatsapp_cloud', 'twilio', 'smtp'];

describe('provider fixtures', () => {
  it('every provider but the sandbox has fixtures, and each cites its sources', () => {
    expect(adapters.map((a) => a.name).filter((name) => name !== 'sandbox')).toEqual(
      expect.arrayContaining(withFixtures),
    );
    for (const name of withFixtures) {
      const cases = casesOf(name);
      expect(Object.values(cases.sources).join(' '), name).toMatch(/https:\/\//);
      expect(cases.errors.length, name).toBeGreaterThan(3);
    }
  });

  it('maps the codes the contract names as it says (the fourth part\'s "Seams")', () => {
    const contract: Array<[string, number, string | undefined, string]> = [
      ['twilio', 401, undefined, 'auth_failed'],
      ['twilio', 400, '20003', 'auth_failed'],
      ['smtp', 535, undefined, 'auth_failed'],
      ['msg91', 401, undefined, 'auth_failed'],
      ['msg91', 200, '207', 'auth_failed'],
      ['msg91', 200, '106', 'auth_failed'],
      ['exotel', 401, undefined, 'auth_failed'],
      ['exotel', 403, undefined, 'auth_failed'],
      ['whatsapp_cloud', 401, '190', 'auth_failed'],
      ['whatsapp_cloud', 400, '131047', 'outside_session'],
      ['twilio', 400, '63016', 'outside_session'],
    ];
    for (const [name, status, code, errorCode] of contract) {
      const listed = casesOf(name).errors.find((e) => e.status === status && e.code === code);
      expect(listed, `${name} ${status} ${code ?? ''} is in its fixtures`).toBeDefined();
      expect(
        adapterOf(name)!.errorFor!({ status, code, text: listed!.text }),
        `${name} ${status} ${code}`,
      ).toEqual(expect.objectContaining({ error_code: errorCode, retry: false }));
    }
    // A 5xx or a throttling answer is retried whatever its body, by every provider with an HTTP API.
    for (const name of ['msg91', 'exotel', 'whatsapp_cloud', 'twilio']) {
      const table = adapterOf(name)!.errorFor!;
      expect(table({ status: 503, code: '12345' }).retry, name).toBe(true);
      expect(table({ status: 429 }), name).toMatchObject({
        error_code: 'rate_limited',
        retry: true,
      });
      expect(table({ status: 429, retryAfterMs: 60_000 }).after_ms, name).toBe(60_000);
    }
  });

  for (const name of withFixtures) {
    describe(name, () => {
      const cases = casesOf(name);
      const adapter = adapterOf(name)!;

      it.each(cases.errors.map((c) => [c.note, c] as const))('error table: %s', (_note, c) => {
        expect(adapter.errorFor!({ status: c.status, code: c.code, text: c.text })).toMatchObject({
          error_code: c.error_code,
          retry: c.retry,
        });
      });

      if (cases.answers) {
        let server: Server;
        let answer: AnswerCase;
        beforeAll(async () => {
          server = createServer((req, res) => {
            req.resume();
            req.on('end', () => {
              const body = typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body);
              res.writeHead(answer.status, {
                'content-type': typeof answer.body === 'string' ? 'text/html' : 'application/json',
                ...answer.headers,
              });
              res.end(body);
            });
          });
          await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
        });
        afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

        it.each(cases.answers.map((c) => [c.note, c] as const))('answer: %s', async (_note, c) => {
          answer = c;
          const account = accounts[name]!;
          const provider = adapter.create({
            channel: adapter.channels[0]!,
            ...account,
            apiUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
            env: {},
            callbackUrl: (kind) => `${PUBLIC}/api/providers/${name}/cha_1/token/${kind}`,
            timeoutMs: 5000,
            log: pino({ level: 'silent' }),
            sandboxDelayMs: 0,
            ownAccount: true,
          });
          const message = {
            channel: adapter.channels[0]!,
            to: '+919812345678',
            body: 'Rally at 5',
            reference: 'msg_1',
            providerTemplate: { ids: { msg91: 'flow1' }, language: 'en', variables: [] },
          };
          if (c.sent) {
            await expect(provider.send(message)).resolves.toMatchObject({ providerMessageId: c.sent });
            return;
          }
          const error = await provider.send(message).then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(error).toBeInstanceOf(ProviderError);
          const refused = error as ProviderError;
          expect({ code: refused.code, retry: refused.retryable }).toEqual({
            code: c.error_code,
            retry: c.retry,
          });
          if (c.after_ms !== undefined) expect(refused.retryAfterMs).toBe(c.after_ms);
          if (c.redacted) expect(refused.message).not.toContain(c.redacted);
        });
      }

      for (const c of cases.callbacks ?? []) {
        it(`callback: ${c.note}`, async () => {
          const query = c.query ?? {};
          const raw =
            c.body === undefined
              ? ''
              : c.form
                ? new URLSearchParams(fieldsOf(c.body)).toString()
                : JSON.stringify(c.body);
          const value = c.form ? Object.fromEntries(new URLSearchParams(raw)) : (c.body ?? {});
          const search = new URLSearchParams(query).toString();
          const url = `${PUBLIC}/api/providers/${name}/cha_1/token/${c.kind}${search ? `?${search}` : ''}`;
          const secret = c.signed === 'wrong' ? 'another secret' : undefined;
          const headers: Record<string, string> = {};
          if (c.signed && name === 'twilio')
            headers['x-twilio-signature'] = twilioSignature(secret ?? 'AUTHTOKEN', url, fieldsOf(value));
          if (c.signed && name === 'whatsapp_cloud')
            headers['x-hub-signature-256'] = `sha256=${createHmac('sha256', secret ?? 'APPSECRET')
              .update(raw)
              .digest('hex')}`;
          const request: CallbackRequest = {
            kind: c.kind,
            method: c.method,
            raw,
            body: value,
            fields: fieldsOf(value),
            query,
            header: (h) => headers[h],
            url,
            credentials: accounts[name]?.credentials ?? {},
            verifyToken: 'VERIFY',
          };
          if (c.refused) {
            await expect(Promise.resolve().then(() => adapter.callback!(request))).rejects.toBeInstanceOf(
              CallbackRefused,
            );
            return;
          }
          const result = await adapter.callback!(request);
          if (c.reports) {
            expect(
              (result.reports ?? []).map((r) => ({
                ...(r.providerMessageId !== undefined ? { providerMessageId: r.providerMessageId } : {}),
                ...(r.to !== undefined ? { to: r.to } : {}),
                ...(r.messageRef !== undefined ? { messageRef: r.messageRef } : {}),
                ...(r.outcome ? { status: r.outcome.status } : {}),
                ...(r.outcome?.status === 'failed' ? { error_code: r.outcome.code } : {}),
                ...(r.optOut ? { optOut: true } : {}),
              })),
            ).toEqual(c.reports);
          }
          if (c.replies) expect(result.replies).toEqual(c.replies.map((r) => expect.objectContaining(r)));
          if (c.answer) expect(result.answer).toEqual(c.answer);
          if (c.speak) expect(result.speak).toEqual(c.speak);
        });
      }
    });
  }
});
