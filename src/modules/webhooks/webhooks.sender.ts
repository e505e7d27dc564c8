import { createHmac } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { BlockedUrlError, guardedLookup, hostOf, isBlockedAddress, type Resolver } from './webhooks.ssrf.ts';

/** What one delivery attempt came to. */
export interface AttemptOutcome {
  ok: boolean;
  statusCode: number | null;
  /** Why it failed, for the delivery log (never the response body). */
  error: string | null;
  /** The receiver answered 410 Gone: the endpoint is to be disabled. */
  gone: boolean;
  /** No answer within WEBHOOK_TIMEOUT_SECONDS (the attempt held its slot the whole time): the circuit breaker counts these. */
  timedOut?: boolean;
}

export interface SignedRequest {
  url: string;
  /** The `whsec_...` secret. */
  secret: string;
  /** `webhook-id`: the same for every attempt of one event, so receivers can deduplicate. */
  messageId: string;
  body: string;
  timestamp: Date;
}

/** The Standard Webhooks body: `{ type, timestamp, data }`, built byte-identically for every attempt. */
export function eventBody(type: string, createdAt: string, payload: string): string {
  return `{"type":${JSON.stringify(type)},"timestamp":${JSON.stringify(createdAt)},"data":${payload}}`;
}

/** `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, keyed with the secret's base64-decoded bytes. */
export function signature(secret: string, messageId: string, unixSeconds: number, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const mac = createHmac('sha256', key).update(`${messageId}.${unixSeconds}.${body}`).digest('base64');
  return `v1,${mac}`;
}

export interface SenderOptions {
  resolver: Resolver;
  allowPrivate: boolean;
  timeoutMs: number;
}

/**
 * POSTs one signed delivery. Redirects are not followed (a 3xx is a failed attempt); the SSRF rules are
 * enforced in the connection's DNS lookup (and for literal addresses before the request is made); the
 * whole attempt, up to the response's status line, is limited to `timeoutMs`.
 */
export async function sendSigned(request: SignedRequest, options: SenderOptions): Promise<AttemptOutcome> {
  const fail = (error: string, statusCode: number | null = null): AttemptOutcome => ({
    ok: false,
    statusCode,
    error: error.slice(0, 500),
    gone: false,
  });
  let url: URL;
  try {
    url = new URL(request.url);
  } catch {
    return fail('invalid URL');
  }
  const host = hostOf(url);
  if (!options.allowPrivate && isIP(host) && isBlockedAddress(host)) {
    return fail(`refused to connect: ${host} is a private, loopback or link-local address.`);
  }
  const unix = Math.floor(request.timestamp.getTime() / 1000);
  const headers = {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(request.body)),
    'user-agent': 'CampaignEngagementService-Webhooks/1',
    'webhook-id': request.messageId,
    'webhook-timestamp': String(unix),
    'webhook-signature': signature(request.secret, request.messageId, unix, request.body),
  };
  const client = url.protocol === 'https:' ? https : http;
  return new Promise<AttemptOutcome>((resolve) => {
    let settled = false;
    const finish = (outcome: AttemptOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const req = client.request(url, {
      method: 'POST',
      headers,
      agent: false,
      lookup: guardedLookup(options.resolver, options.allowPrivate),
    });
    const timer = setTimeout(() => {
      finish({ ...fail(`timed out after ${options.timeoutMs / 1000} s`), timedOut: true });
      req.destroy();
    }, options.timeoutMs);
    req.on('response', (res) => {
      // The status is all we need: the body is not read (nor kept), and the connection is closed at once.
      res.destroy();
      const status = res.statusCode ?? 0;
      if (status >= 200 && status < 300) finish({ ok: true, statusCode: status, error: null, gone: false });
      else if (status === 410)
        finish({ ok: false, statusCode: 410, error: 'HTTP 410 Gone: endpoint disabled', gone: true });
      else if (status >= 300 && status < 400)
        finish(fail(`HTTP ${status}: redirects are not followed`, status));
      else finish(fail(`HTTP ${status}`, status));
    });
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (error instanceof BlockedUrlError) finish(fail(error.message));
      else finish(fail(error.code ? `${error.code}: ${error.message}` : error.message));
    });
    req.end(request.body);
  });
}
