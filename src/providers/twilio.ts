import { createHmac, timingSafeEqual } from 'node:crypto';
import type { TwilioSettings } from '../config.ts';
import type { MessageErrorCode } from '../domain.ts';
import { readCapped, retryAfterOf } from './http.ts';
import {
  type Channel,
  type FinalStatus,
  type MessageProvider,
  type OutgoingMessage,
  ProviderError,
  type ReportOutcome,
  type SendResult,
} from './provider.ts';

export const TWILIO_STATUS_PATH = '/api/providers/twilio/status';

function xml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');
}

/**
 * Twilio's REST API: SMS and WhatsApp as Messages, IVR as a Call whose TwiML speaks the message. Basic auth
 * with the account SID and auth token; the base URL is configurable (tests point it at a local server).
 * Status callbacks come back to TWILIO_STATUS_PATH with our message id in the query string.
 */
export class TwilioProvider implements MessageProvider {
  readonly name = 'twilio';

  constructor(
    readonly channel: Exclude<Channel, 'email'>,
    private readonly settings: TwilioSettings & {
      /** A channel account's callback_urls.delivery: its status callbacks go there instead. */
      statusCallbackUrl?: string | undefined;
    },
  ) {}

  async send(message: OutgoingMessage, signal?: AbortSignal): Promise<SendResult> {
    const s = this.settings;
    const form = new URLSearchParams();
    let resource: string;
    if (this.channel === 'ivr') {
      resource = 'Calls.json';
      form.set('To', message.to);
      form.set('From', this.from(s.voiceFrom, 'TWILIO_VOICE_FROM'));
      form.set('Twiml', `<Response><Say>${xml(message.body)}</Say></Response>`);
    } else {
      resource = 'Messages.json';
      const whatsapp = this.channel === 'whatsapp';
      form.set('To', whatsapp ? `whatsapp:${message.to}` : message.to);
      const from = whatsapp
        ? this.from(s.whatsappFrom, 'TWILIO_WHATSAPP_FROM')
        : this.from(s.smsFrom, 'TWILIO_SMS_FROM');
      form.set('From', whatsapp && !from.startsWith('whatsapp:') ? `whatsapp:${from}` : from);
      form.set('Body', message.body);
      if (message.mediaUrl) form.set('MediaUrl', message.mediaUrl);
    }
    if (s.statusCallbackUrl && message.reference) {
      form.set('StatusCallback', `${s.statusCallbackUrl}?message=${message.reference}`);
    } else if (s.publicBaseUrl && message.reference) {
      form.set('StatusCallback', `${s.publicBaseUrl}${TWILIO_STATUS_PATH}?message=${message.reference}`);
    }
    const url = `${s.apiBaseUrl}/2010-04-01/Accounts/${encodeURIComponent(s.accountSid)}/${resource}`;
    let res: Response;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${s.accountSid}:${s.authToken}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'application/json',
        },
        body: form.toString(),
        signal: signal ?? AbortSignal.timeout(15_000),
      });
    } catch (error) {
      throw new ProviderError(`Twilio could not be reached: ${(error as Error).message}`, true);
    }
    // A body that is not JSON (a proxy's HTML page) is read as empty: the status decides. Read at most 1 MB.
    let payload: { sid?: string; message?: string; code?: number } = {};
    try {
      payload = JSON.parse(await readCapped('Twilio', res)) as typeof payload;
    } catch (error) {
      if (error instanceof ProviderError) throw error;
    }
    payload = payload && typeof payload === 'object' ? payload : {};
    if (res.ok && typeof payload.sid === 'string') return { providerMessageId: payload.sid };
    const reason = `Twilio answered ${res.status}${payload.code ? ` (code ${payload.code})` : ''}: ${payload.message ?? 'no message'}`;
    // 401 (Twilio's 20003): the account SID or auth token is refused.
    if (res.status === 401 || payload.code === 20003) throw new ProviderError(reason, false, 'auth_failed');
    throw new ProviderError(
      reason,
      res.status === 429 || res.status >= 500,
      res.status === 429 ? 'rate_limited' : (twilioErrorCode(payload.code) ?? 'provider_rejected'),
      retryAfterOf(res),
    );
  }

  private from(value: string | undefined, setting: string): string {
    if (!value) throw new ProviderError(`${setting} is not set`, false);
    return value;
  }
}

/**
 * Twilio error codes (https://www.twilio.com/docs/api/errors) that say more than "refused": the recipient
 * opted out (STOP), the number is not one a message can reach, or the carrier could not deliver.
 */
const TWILIO_ERROR_CODES: Record<number, MessageErrorCode> = {
  21610: 'opted_out', // the recipient replied STOP
  63016: 'outside_session', // WhatsApp: outside the 24-hour window (a template is needed)
  21211: 'invalid_recipient', // invalid 'To' number
  21214: 'invalid_recipient', // 'To' number cannot be reached
  21217: 'invalid_recipient', // not a valid phone number
  21401: 'invalid_recipient', // invalid phone number
  21407: 'invalid_recipient', // not supported for this number
  21408: 'invalid_recipient', // region not enabled
  21612: 'invalid_recipient', // 'To' number not reachable from this sender
  21614: 'invalid_recipient', // 'To' number is not a valid mobile number
  30005: 'invalid_recipient', // unknown destination handset
  30006: 'invalid_recipient', // landline or unreachable carrier
  30003: 'undeliverable', // unreachable destination handset
  30008: 'undeliverable', // unknown error
  30034: 'undeliverable', // unregistered sender
  30004: 'provider_rejected', // message blocked
  30007: 'provider_rejected', // filtered as spam
};

/** A Twilio error code (number or text) as our message `error_code`; undefined for codes not listed. */
export function twilioErrorCode(code: number | string | undefined): MessageErrorCode | undefined {
  if (code === undefined || code === '') return undefined;
  return TWILIO_ERROR_CODES[Number(code)];
}

/** X-Twilio-Signature: base64 HMAC-SHA1 (auth token) of the full URL followed by each POST parameter's name and value, sorted by name. */
export function twilioSignature(authToken: string, url: string, params: Record<string, string>): string {
  const data = Object.keys(params)
    .sort()
    .reduce((acc, key) => acc + key + params[key], url);
  return createHmac('sha1', authToken).update(data, 'utf8').digest('base64');
}

export function verifyTwilioSignature(
  authToken: string,
  url: string,
  params: Record<string, string>,
  header: string | undefined,
): boolean {
  if (!header) return false;
  const expected = Buffer.from(twilioSignature(authToken, url, params));
  const given = Buffer.from(header);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

/** Twilio's MessageStatus / CallStatus as our final status; undefined for intermediate states. */
export function twilioFinalStatus(params: Record<string, string>): FinalStatus | undefined {
  const status = (params.MessageStatus ?? params.CallStatus ?? '').toLowerCase();
  if (['delivered', 'read', 'completed'].includes(status)) return 'delivered';
  if (['undelivered', 'failed', 'busy', 'no-answer', 'canceled'].includes(status)) return 'failed';
  return undefined;
}

/** A Twilio status callback as the report it makes of its message; undefined for intermediate states. */
export function twilioOutcome(params: Record<string, string>): ReportOutcome | undefined {
  const status = twilioFinalStatus(params);
  if (status === 'delivered') return { status: 'delivered' };
  if (status !== 'failed') return undefined;
  const code = params.ErrorCode;
  return {
    status: 'failed',
    code: twilioErrorCode(code) ?? 'undeliverable',
    error: `Twilio reported ${params.MessageStatus ?? params.CallStatus}${code ? ` (error ${code})` : ''}`,
  };
}
