import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Local test doubles of the providers that channel accounts use, each speaking the provider's documented wire
 * format (contract, third part, "The providers Indian offices use"): the real adapters call them over HTTP on
 * loopback, they record every request, and the tests post delivery reports back the way each provider does.
 */
export interface Recorded {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  raw: string;
  /** JSON bodies parsed; form bodies as fields. */
  json: unknown;
  form: Record<string, string>;
  at: number;
}

type Answer = { status: number; body: unknown };

export interface Double {
  url: string;
  requests: Recorded[];
  close(): Promise<void>;
}

async function startDouble(answer: (request: Recorded) => Answer): Promise<Double> {
  const requests: Recorded[] = [];
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk: Buffer) => (raw += chunk.toString('utf8')));
    req.on('end', () => {
      const type = req.headers['content-type'] ?? '';
      let json: unknown;
      if (type.includes('json')) {
        try {
          json = JSON.parse(raw);
        } catch {
          json = undefined;
        }
      }
      const form = type.includes('form-urlencoded') ? Object.fromEntries(new URLSearchParams(raw)) : {};
      const request = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        raw,
        json,
        form,
        at: Date.now(),
      };
      requests.push(request);
      const { status, body } = answer(request);
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

export const MSG91_AUTHKEY = 'msg91-authkey-0123456789';

/**
 * MSG91's Flow API: `POST /api/v5/flow`, header `authkey`; `{ type: "success", message: <request id> }`, or
 * `{ type: "error", message, code }` (207: the authkey is not valid).
 */
export async function fakeMsg91(): Promise<Double> {
  let n = 0;
  return startDouble((r) => {
    if (r.method !== 'POST' || r.path !== '/api/v5/flow')
      return { status: 404, body: { type: 'error', message: 'Not found' } };
    if (r.headers.authkey !== MSG91_AUTHKEY)
      return { status: 401, body: { type: 'error', message: 'Authentication failure', code: '207' } };
    const body = r.json as { template_id?: string; recipients?: Array<{ mobiles?: string }> } | undefined;
    if (!body?.template_id || !Array.isArray(body.recipients) || body.recipients.length === 0)
      return {
        status: 400,
        body: { type: 'error', message: 'Template ID or recipients missing', code: '301' },
      };
    n += 1;
    return { status: 200, body: { type: 'success', message: `3763646c${String(n).padStart(16, '0')}` } };
  });
}

export const EXOTEL = { sid: 'ces-office1', apiKey: 'exotel-key-abc', apiToken: 'exotel-token-xyz' };

/**
 * Exotel's v1 API with HTTP basic auth: `Sms/send.json` answers `{ SMSMessage: { Sid, Status, ... } }`,
 * `Calls/connect.json` `{ Call: { Sid, Status, ... } }`; a wrong key or token is 401 with a RestException.
 */
export async function fakeExotel(): Promise<Double> {
  let n = 0;
  return startDouble((r) => {
    const expected = `Basic ${Buffer.from(`${EXOTEL.apiKey}:${EXOTEL.apiToken}`).toString('base64')}`;
    if (r.headers.authorization !== expected)
      return {
        status: 401,
        body: {
          RestException: { Status: 401, Message: 'Authentication is required to view this resource.' },
        },
      };
    n += 1;
    if (r.path === `/v1/Accounts/${EXOTEL.sid}/Sms/send.json`) {
      if ((r.form.To ?? '').endsWith('4030'))
        return {
          status: 403,
          body: { RestException: { Status: 403, Code: 34002, Message: 'Insufficient balance' } },
        };
      return {
        status: 200,
        body: {
          SMSMessage: {
            Sid: `sms${String(n).padStart(28, '0')}`,
            Status: 'queued',
            To: r.form.To,
            AccountSid: EXOTEL.sid,
          },
        },
      };
    }
    if (r.path === `/v1/Accounts/${EXOTEL.sid}/Calls/connect.json`)
      return {
        status: 200,
        body: {
          Call: { Sid: `call${String(n).padStart(28, '0')}`, Status: 'in-progress', To: r.form.CallerId },
        },
      };
    return { status: 404, body: { RestException: { Status: 404, Message: 'Not found' } } };
  });
}

export const META = {
  phoneNumberId: '106540352242922',
  accessToken: 'EAAGm0PX4ZCpsBA-test-token',
  appSecret: 'meta-app-secret-123',
};

/**
 * Meta's Graph API for WhatsApp: `POST /<version>/<phone_number_id>/messages` with a Bearer token; success
 * `{ messaging_product, contacts, messages: [{ id: "wamid..." }] }`; errors `{ error: { message, type, code,
 * error_data: { details } } }` (190: the token is not valid; 131047 for a number ending 4700; 130429 for one
 * ending 4290).
 */
export async function fakeMeta(version: string): Promise<Double> {
  let n = 0;
  return startDouble((r) => {
    if (r.path !== `/${version}/${META.phoneNumberId}/messages`)
      return {
        status: 404,
        body: { error: { message: 'Unknown path', type: 'GraphMethodException', code: 100 } },
      };
    if (r.headers.authorization !== `Bearer ${META.accessToken}`)
      return {
        status: 401,
        body: {
          error: {
            message: 'Invalid OAuth access token - Cannot parse access token',
            type: 'OAuthException',
            code: 190,
            fbtrace_id: 'A1',
          },
        },
      };
    const to = (r.json as { to?: string } | undefined)?.to ?? '';
    if (to.endsWith('4700'))
      return {
        status: 400,
        body: {
          error: {
            message: '(#131047) Re-engagement message',
            type: 'OAuthException',
            code: 131047,
            error_data: {
              messaging_product: 'whatsapp',
              details:
                'Message failed to send because more than 24 hours have passed since the customer last replied to this number.',
            },
          },
        },
      };
    if (to.endsWith('4290'))
      return {
        status: 400,
        body: {
          error: {
            message: '(#130429) Rate limit hit',
            type: 'OAuthException',
            code: 130429,
            error_data: { details: 'Cloud API message throughput has been reached.' },
          },
        },
      };
    n += 1;
    return {
      status: 200,
      body: {
        messaging_product: 'whatsapp',
        contacts: [{ input: to, wa_id: to }],
        messages: [{ id: `wamid.HBgM${String(n).padStart(12, '0')}` }],
      },
    };
  });
}

export const TWILIO = { sid: 'AC00000000000000000000000000000abc', token: 'twilio-account-token-42' };

/** Twilio's REST API for a channel account: `POST /2010-04-01/Accounts/<sid>/Messages.json`, basic auth. */
export async function fakeTwilio(): Promise<Double> {
  let n = 0;
  return startDouble((r) => {
    const expected = `Basic ${Buffer.from(`${TWILIO.sid}:${TWILIO.token}`).toString('base64')}`;
    if (r.headers.authorization !== expected)
      return { status: 401, body: { code: 20003, message: 'Authenticate', status: 401 } };
    n += 1;
    return { status: 201, body: { sid: `SM${String(n).padStart(32, '0')}`, status: 'queued' } };
  });
}
