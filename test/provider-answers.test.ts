/**
 * Provider answers map by their meaning (the contract's fourth part, "Seams"): each real adapter calls a local
 * HTTP server that answers as the provider documents, and the error it raises is checked: refused credentials
 * are `auth_failed` (not retried), WhatsApp outside the 24-hour window is `outside_session`, a 5xx or a
 * throttling answer is retried whatever its body (no sooner than its Retry-After), and an answer over 1 MB is a
 * provider error read no further. A call past PROVIDER_TIMEOUT_MS is a ProviderTimeout (never repeated).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterAll, describe, expect, it } from 'vitest';
import { ExotelProvider } from '../src/providers/exotel/index.ts';
import { Msg91Provider } from '../src/providers/msg91/index.ts';
import { handOver } from '../src/modules/sending/hand-over.ts';
import {
  AnswerUnread,
  type MessageProvider,
  type OutgoingMessage,
  ProviderError,
  ProviderTimeout,
  sendWithin,
} from '../src/providers/provider.ts';
import { SmtpProvider } from '../src/providers/smtp/index.ts';
import { TwilioProvider } from '../src/providers/twilio/index.ts';
import { WhatsAppCloudProvider } from '../src/providers/whatsapp_cloud/index.ts';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
const servers: Server[] = [];
afterAll(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** A local server answering every request with `handler`. */
async function answering(handler: Handler): Promise<string> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => handler(req, res));
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const json =
  (status: number, body: unknown, headers: Record<string, string> = {}): Handler =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };

const sms: OutgoingMessage = { channel: 'sms', to: '+919812345678', body: 'Rally at 5', reference: 'msg_1' };
const msg91Message: OutgoingMessage = {
  ...sms,
  providerTemplate: { ids: { msg91: '65f0c0ffee' }, language: 'en', variables: [] },
};

async function refusal(provider: MessageProvider, message: OutgoingMessage = sms): Promise<ProviderError> {
  try {
    await sendWithin(provider, message, 5000);
  } catch (error) {
    expect(error).toBeInstanceOf(ProviderError);
    return error as ProviderError;
  }
  throw new Error('the send did not fail');
}

const twilio = (base: string, channel: 'sms' | 'whatsapp' = 'sms') =>
  new TwilioProvider(channel, {
    accountSid: 'AC00000000000000000000000000000abc',
    authToken: 'token',
    apiBaseUrl: base,
    smsFrom: '+15005550006',
    whatsappFrom: '+15005550006',
    voiceFrom: undefined,
    statusCallbackUrl: '',
  });
const msg91 = (base: string) => new Msg91Provider({ baseUrl: base, authkey: 'key', sender: 'CESOFC' });
const whatsapp = (base: string) =>
  new WhatsAppCloudProvider({ baseUrl: base, version: 'v23.0', phoneNumberId: '1065', accessToken: 'EAAG' });
const exotel = (base: string) =>
  new ExotelProvider('sms', {
    baseUrl: base,
    sid: 'office',
    apiKey: 'k',
    apiToken: 't',
    sender: 'CESOFC',
    callerId: undefined,
    appId: undefined,
    surveyAppId: undefined,
    dltEntityId: undefined,
    deliveryUrl: 'https://ces.example.org/d',
    callStatusUrl: 'https://ces.example.org/c',
  });

describe('provider answers, as each provider documents them', () => {
  it('Twilio 401 (code 20003: https://www.twilio.com/docs/api/errors/20003) is auth_failed, not retried', async () => {
    const base = await answering(
      json(401, {
        code: 20003,
        message: 'Authenticate',
        more_info: 'https://www.twilio.com/docs/errors/20003',
        status: 401,
      }),
    );
    const error = await refusal(twilio(base));
    expect([error.code, error.retryable]).toEqual(['auth_failed', false]);
  });

  it('Twilio 63016 (WhatsApp outside the 24-hour window) is outside_session, not opted_out', async () => {
    const base = await answering(
      json(400, {
        code: 63016,
        message: 'Failed to send freeform message because you are outside the allowed window.',
        status: 400,
      }),
    );
    const error = await refusal(twilio(base, 'whatsapp'), { ...sms, channel: 'whatsapp' });
    expect([error.code, error.retryable]).toEqual(['outside_session', false]);
  });

  it('Twilio 429 with Retry-After: 60 is retried, no sooner than 60 s', async () => {
    const base = await answering(
      json(429, { code: 20429, message: 'Too Many Requests', status: 429 }, { 'retry-after': '60' }),
    );
    const error = await refusal(twilio(base));
    expect([error.code, error.retryable, error.retryAfterMs]).toEqual(['rate_limited', true, 60_000]);
  });

  it('MSG91 401 without code 207 or 106 is auth_failed', async () => {
    const base = await answering(json(401, { type: 'error', message: 'Unauthorized' }));
    const error = await refusal(msg91(base), msg91Message);
    expect([error.code, error.retryable]).toEqual(['auth_failed', false]);
  });

  it('MSG91 503 with Retry-After is retried no sooner than it says', async () => {
    const base = await answering(
      json(503, { type: 'error', message: 'Service unavailable' }, { 'retry-after': '30' }),
    );
    const error = await refusal(msg91(base), msg91Message);
    expect([error.retryable, error.retryAfterMs]).toEqual([true, 30_000]);
  });

  it('a WhatsApp 5xx carrying a Graph code is retried (https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes)', async () => {
    const base = await answering(
      json(500, {
        error: { message: 'An unknown error occurred', type: 'OAuthException', code: 1, fbtrace_id: 'A' },
      }),
    );
    const error = await refusal(whatsapp(base), { ...sms, channel: 'whatsapp' });
    expect(error.retryable).toBe(true);
  });

  it('WhatsApp code 190 (access token expired) is auth_failed', async () => {
    const base = await answering(
      json(401, { error: { message: 'Error validating access token', type: 'OAuthException', code: 190 } }),
    );
    const error = await refusal(whatsapp(base), { ...sms, channel: 'whatsapp' });
    expect([error.code, error.retryable]).toEqual(['auth_failed', false]);
  });

  it('Exotel 401 and 403 are auth_failed; its 429 with Retry-After is retried after it', async () => {
    const refused = await answering(
      json(401, { RestException: { Status: 401, Message: 'Authentication required' } }),
    );
    expect((await refusal(exotel(refused))).code).toBe('auth_failed');
    const forbidden = await answering(json(403, { RestException: { Status: 403, Message: 'Forbidden' } }));
    expect((await refusal(exotel(forbidden))).code).toBe('auth_failed');
    const busy = await answering(
      json(429, { RestException: { Status: 429, Message: 'Too many' } }, { 'retry-after': '5' }),
    );
    const error = await refusal(exotel(busy));
    expect([error.code, error.retryable, error.retryAfterMs]).toEqual(['rate_limited', true, 5000]);
  });

  it('an answer larger than 1 MB is read no further: a 2xx is taken (never retried, so never sent twice), another status decides by itself', async () => {
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const flood = (status: number) => (_req: IncomingMessage, res: ServerResponse) => {
      let written = 0;
      res.writeHead(status, { 'content-type': 'application/json' });
      const more = () => {
        // 200 MB offered; the adapter stops reading past 1 MB and the server stops with it.
        while (written < 200 * 1024 * 1024) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      res.on('close', () => (written = Number.MAX_SAFE_INTEGER));
      more();
    };
    const ok = await answering(flood(200));
    for (const provider of [msg91(ok), twilio(ok), whatsapp(ok), exotel(ok)]) {
      const message = provider.name === 'msg91' ? msg91Message : sms;
      await expect(provider.send(message)).rejects.toBeInstanceOf(AnswerUnread);
      // The one hand-over reads it as handed over without the provider's id, with why.
      const [result] = await handOver(provider, [7], message, 10_000);
      expect(result).toMatchObject({
        kind: 'handed',
        handover: {
          id: 7,
          providerMessageId: null,
          note: expect.stringMatching(/more than 1024 KB: taken as accepted/),
        },
      });
    }
    const failing = await answering(flood(503));
    for (const provider of [msg91(failing), twilio(failing), whatsapp(failing), exotel(failing)]) {
      const error = await refusal(provider, provider.name === 'msg91' ? msg91Message : sms);
      expect(error.retryable, provider.name).toBe(true);
      expect(error.message).toMatch(/503/);
    }
  });

  describe('a refused MSG91 batch of 200', () => {
    /** MSG91 refusing any request that carries one of `bad` (400, code 202), naming them or not; the requests made. */
    async function flow(bad: Set<string>, names: boolean, code = '202') {
      const requests: string[][] = [];
      const server = createServer((req, res) => {
        let raw = '';
        req.on('data', (c: Buffer) => (raw += c.toString()));
        req.on('end', () => {
          const mobiles = (JSON.parse(raw) as { recipients: Array<{ mobiles: string }> }).recipients.map(
            (r) => r.mobiles,
          );
          requests.push(mobiles);
          const refused = mobiles.filter((m) => bad.has(m));
          res.writeHead(refused.length > 0 || code !== '202' ? 400 : 200, {
            'content-type': 'application/json',
          });
          if (code !== '202')
            return void res.end(
              JSON.stringify({ type: 'error', message: 'Template not approved for DLT', code }),
            );
          res.end(
            JSON.stringify(
              refused.length > 0
                ? {
                    type: 'error',
                    code: '202',
                    message: `Invalid mobile number${names ? `: ${refused.join(', ')}` : ''}`,
                  }
                : { type: 'success', message: `req${requests.length}` },
            ),
          );
        });
      });
      servers.push(server);
      server.listen(0, '127.0.0.1');
      await new Promise((resolve) => server.once('listening', resolve));
      const provider = msg91(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
      const numbers = Array.from({ length: 200 }, (_, i) => `+9198123${String(i).padStart(5, '0')}`);
      const messages = numbers.map((to) => ({ ...msg91Message, to }));
      const [outcome] = await Promise.allSettled([provider.sendMany(messages)]);
      return { outcome: outcome!, requests, numbers };
    }

    it('every number refused, none named: at most 17 requests (not 399), and the batch fails invalid_recipient', async () => {
      const numbers = Array.from({ length: 200 }, (_, i) => `9198123${String(i).padStart(5, '0')}`);
      const { outcome, requests } = await flow(new Set(numbers), false);
      expect(requests.length).toBeLessThanOrEqual(17);
      expect(outcome.status).toBe('rejected');
      expect((outcome as PromiseRejectedResult).reason).toMatchObject({
        code: 'invalid_recipient',
        retryable: false,
      });
    });

    it('the numbers the answer names fail alone; the rest go in one more request', async () => {
      const bad = ['919812300007', '919812300150', '919812300199'];
      const { outcome, requests } = await flow(new Set(bad), true);
      expect(requests.map((r) => r.length)).toEqual([200, 197]);
      expect(outcome.status).toBe('fulfilled');
      const result = (outcome as PromiseFulfilledResult<Awaited<ReturnType<Msg91Provider['sendMany']>>>)
        .value;
      expect(result.refused!.map(([i]) => i)).toEqual([7, 150, 199]);
      // The refusal's text reaches error_message without the numbers.
      expect(result.refused![0]![1]).not.toMatch(/\d{10}/);
      expect(result.ids![0]).toBe('req2');
    });

    it('one number refused, none named: it fails alone in at most 17 requests', async () => {
      const { outcome, requests } = await flow(new Set(['919812300042']), false);
      expect(requests.length).toBeLessThanOrEqual(17);
      const result = (outcome as PromiseFulfilledResult<Awaited<ReturnType<Msg91Provider['sendMany']>>>)
        .value;
      expect(result.refused!.map(([i]) => i)).toEqual([42]);
    });

    it('a refusal about the account or template fails the whole batch in its one request', async () => {
      const { outcome, requests } = await flow(new Set(), false, '301');
      expect(requests).toHaveLength(1);
      expect(outcome.status).toBe('rejected');
    });
  });

  it('SMTP 535 (authentication refused) is auth_failed, not retried', async () => {
    const server = new SMTPServer({
      authOptional: false,
      allowInsecureAuth: true,
      disabledCommands: ['STARTTLS'],
      onAuth: (_auth, _session, callback) =>
        callback(Object.assign(new Error('Invalid username or password'), { responseCode: 535 })),
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.server.address() as AddressInfo).port;
    const smtp = new SmtpProvider(
      {
        host: '127.0.0.1',
        port,
        secure: false,
        user: 'office',
        password: 'wrong',
        from: 'office@example.org',
      },
      5000,
    );
    try {
      const error = await refusal(smtp, {
        channel: 'email',
        to: 'voter@example.org',
        subject: 'Hi',
        body: 'Hi',
      });
      expect([error.code, error.retryable]).toEqual(['auth_failed', false]);
    } finally {
      smtp.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('a call past PROVIDER_TIMEOUT_MS is a ProviderTimeout: not retried, the message may have gone', async () => {
    const base = await answering(() => {
      // never answers
    });
    let caught: unknown;
    try {
      await sendWithin(msg91(base), msg91Message, 300);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ProviderTimeout);
    expect((caught as ProviderTimeout).retryable).toBe(false);
  });
});
