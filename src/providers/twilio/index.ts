import { createHmac } from 'node:crypto';
import { sameText } from '../../lib/crypto.ts';
import { Type } from 'typebox';
import type { MessageErrorCode } from '../../domain.ts';
import {
  CallbackRefused,
  type CallbackRequest,
  type CallbackResult,
  type ErrorVerdict,
  httpVerdict,
  type ProviderAdapter,
  type ProviderAnswerFacts,
} from '../adapter.ts';
import { callProvider, providerText } from '../http.ts';
import {
  type Channel,
  type FinalStatus,
  type MessageProvider,
  type OutgoingMessage,
  ProviderError,
  type ReportOutcome,
  type SendResult,
} from '../provider.ts';

export interface TwilioAccount {
  accountSid: string;
  authToken: string;
  apiBaseUrl: string;
  smsFrom: string | undefined;
  whatsappFrom: string | undefined;
  voiceFrom: string | undefined;
  /** Where its status callbacks go ('' : none), our message id added as `?message=`. */
  statusCallbackUrl: string;
}

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
    private readonly settings: TwilioAccount,
  ) {}

  async send(message: OutgoingMessage, signal?: AbortSignal): Promise<SendResult> {
    const s = this.settings;
    const form = new URLSearchParams();
    let resource: string;
    if (this.channel === 'ivr') {
      resource = 'Calls.json';
      form.set('To', message.to);
      form.set('From', this.from(s.voiceFrom, 'voice_from'));
      form.set('Twiml', `<Response><Say>${xml(message.body)}</Say></Response>`);
    } else {
      resource = 'Messages.json';
      const whatsapp = this.channel === 'whatsapp';
      form.set('To', whatsapp ? `whatsapp:${message.to}` : message.to);
      const from = whatsapp ? this.from(s.whatsappFrom, 'whatsapp_from') : this.from(s.smsFrom, 'sms_from');
      form.set('From', whatsapp && !from.startsWith('whatsapp:') ? `whatsapp:${from}` : from);
      form.set('Body', message.body);
      if (message.mediaUrl) form.set('MediaUrl', message.mediaUrl);
    }
    if (s.statusCallbackUrl && message.reference)
      form.set('StatusCallback', `${s.statusCallbackUrl}?message=${message.reference}`);
    const url = `${s.apiBaseUrl}/2010-04-01/Accounts/${encodeURIComponent(s.accountSid)}/${resource}`;
    // A body that is not JSON (a proxy's HTML page) is read as empty: the status decides. Read at most 1 MB.
    const answer = await callProvider(
      'Twilio',
      url,
      {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${s.accountSid}:${s.authToken}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'application/json',
        },
        body: form.toString(),
      },
      signal,
    );
    const payload = answer.body as { sid?: unknown; message?: unknown; code?: unknown };
    if (answer.status < 300 && typeof payload.sid === 'string') return { providerMessageId: payload.sid };
    const code =
      typeof payload.code === 'number' || typeof payload.code === 'string' ? String(payload.code) : undefined;
    const reason = `Twilio answered ${answer.status}${code ? ` (code ${code})` : ''}: ${providerText(payload.message, REDACT)}`;
    throw ProviderError.of(
      reason,
      errorFor({
        status: answer.status,
        code,
        retryAfterMs: answer.retryAfterMs,
      }),
    );
  }

  private from(value: string | undefined, setting: string): string {
    if (!value)
      throw new ProviderError(
        `No ${setting} is set (the account's settings.${setting}, or TWILIO_${setting.toUpperCase()} for the deployment).`,
        false,
      );
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

/**
 * Twilio's answers: 401 and its code 20003 are refused credentials; 429 and any 5xx are retried (after
 * Retry-After); otherwise the error code decides (TWILIO_ERROR_CODES), else the message is refused.
 */
function errorFor(answer: ProviderAnswerFacts): ErrorVerdict {
  if (answer.status === 401 || answer.code === '20003') return { error_code: 'auth_failed', retry: false };
  const common = httpVerdict(answer);
  if (common) return common;
  return { error_code: twilioErrorCode(answer.code) ?? 'provider_rejected', retry: false };
}

/** An account SID, as Twilio quotes it in the resource paths of its error texts. */
const REDACT = [/AC[0-9a-f]{32}/gi];

/** Twilio's error for a recipient who has unsubscribed (replied STOP to the sender at Twilio's end). */
const UNSUBSCRIBED = '21610';

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
  return sameText(twilioSignature(authToken, url, params), header);
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

const EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response></Response>';

/** Twilio: SMS, WhatsApp and voice calls; signed status callbacks and (for the deployment's number) replies. */
export const twilio: ProviderAdapter = {
  name: 'twilio',
  label: 'Twilio',
  channels: ['sms', 'whatsapp', 'ivr'],
  fieldText: {
    account_sid: { label: { en: 'Account SID', hi: 'खाता SID' }, hint_hi: 'खाते का SID (AC...)।' },
    sms_from: {
      label: { en: 'SMS from', hi: 'SMS भेजने वाला' },
      hint_hi: 'वह नंबर या सेंडर आईडी जिससे SMS जाते हैं।',
    },
    whatsapp_from: {
      label: { en: 'WhatsApp from', hi: 'WhatsApp भेजने वाला' },
      hint_hi: 'WhatsApp सेंडर (whatsapp:+1...)।',
    },
    voice_from: { label: { en: 'Calls from', hi: 'कॉल करने वाला नंबर' }, hint_hi: 'वह नंबर जिससे कॉल आती हैं।' },
    auth_token: { label: { en: 'Auth token', hi: 'ऑथ टोकन' }, hint_hi: 'ऑथ टोकन।' },
  },
  templatesOnly: ['whatsapp'],
  settings: Type.Object({
    account_sid: Type.String({ minLength: 1, maxLength: 500, description: 'The account SID (AC...).' }),
    sms_from: Type.Optional(
      Type.String({ minLength: 1, maxLength: 500, description: 'The number or sender id SMS go from.' }),
    ),
    whatsapp_from: Type.Optional(
      Type.String({ minLength: 1, maxLength: 500, description: 'The WhatsApp sender (whatsapp:+1...).' }),
    ),
    voice_from: Type.Optional(
      Type.String({ minLength: 1, maxLength: 500, description: 'The number calls come from.' }),
    ),
  }),
  credentials: Type.Object({
    auth_token: Type.String({
      minLength: 1,
      maxLength: 2000,
      pattern: '^\\S+$',
      description: 'The auth token.',
    }),
  }),
  channelSettings: { sms: ['sms_from'], whatsapp: ['whatsapp_from'], ivr: ['voice_from'] },
  callbacks: ['delivery'],
  api: { env: 'TWILIO_BASE_URL', alias: 'TWILIO_API_BASE_URL', url: 'https://api.twilio.com' },
  deployment: { prefix: 'TWILIO', callbacks: ['status', 'inbound'] },
  errorFor,
  redact: REDACT,
  create(c) {
    if (c.channel === 'email') throw new Error('twilio cannot send email');
    return new TwilioProvider(c.channel, {
      accountSid: String(c.settings.account_sid ?? ''),
      authToken: c.credentials.auth_token ?? '',
      apiBaseUrl: c.apiUrl,
      smsFrom: optional(c.settings.sms_from),
      whatsappFrom: optional(c.settings.whatsapp_from),
      voiceFrom: optional(c.settings.voice_from),
      statusCallbackUrl: c.callbackUrl(c.ownAccount ? 'delivery' : 'status'),
    });
  },
  callback(request: CallbackRequest): CallbackResult {
    if (
      !verifyTwilioSignature(
        request.credentials.auth_token ?? '',
        request.url,
        { ...request.fields },
        request.header('x-twilio-signature'),
      )
    )
      throw new CallbackRefused('The X-Twilio-Signature does not match this request and the auth token.');
    const fields = request.fields;
    if (request.kind === 'inbound') {
      const from = fields.From ?? '';
      const whatsapp = from.startsWith('whatsapp:');
      // Twilio's retries and replays carry the same MessageSid: the reply is stored once.
      const id = (fields.MessageSid ?? fields.SmsSid ?? '').slice(0, 64);
      return {
        replies: from
          ? [
              {
                channel: whatsapp ? 'whatsapp' : 'sms',
                from: whatsapp ? from.slice('whatsapp:'.length) : from,
                body: fields.Body ?? '',
                id,
              },
            ]
          : [],
        answer: { type: 'text/xml', body: EMPTY_TWIML },
      };
    }
    return {
      reports: [
        {
          messageRef: request.query.message ?? '',
          outcome: twilioOutcome(fields),
          optOut: fields.ErrorCode === UNSUBSCRIBED,
        },
      ],
    };
  },
};

const optional = (value: unknown) => (typeof value === 'string' && value !== '' ? value : undefined);
