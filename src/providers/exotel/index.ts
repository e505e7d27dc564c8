import { Type } from 'typebox';
import type { MessageErrorCode } from '../../domain.ts';
import {
  type CallAnswer,
  type CallbackAnswer,
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
  type MessageProvider,
  type OutgoingMessage,
  ProviderError,
  type SendResult,
  type ReportOutcome,
} from '../provider.ts';

export interface ExotelAccount {
  baseUrl: string;
  sid: string;
  apiKey: string;
  apiToken: string;
  sender: string;
  callerId: string | undefined;
  appId: string | undefined;
  /** The flow of survey calls (its Gather and Passthru applets call our survey URLs). */
  surveyAppId: string | undefined;
  dltEntityId: string | undefined;
  /** callback_urls.delivery and callback_urls.call_status of the account. */
  deliveryUrl: string;
  callStatusUrl: string;
}

/**
 * Exotel's v1 API (HTTP basic auth with the API key and token): SMS with the DLT entity and template ids
 * (`Sms/send.json`), and IVR as a call connected to the office's flow (`Calls/connect.json`), whose Greeting
 * applet fetches the message's text from callback_urls.greeting. Our message id goes in `CustomField`.
 */
export class ExotelProvider implements MessageProvider {
  readonly name = 'exotel';

  constructor(
    readonly channel: Extract<Channel, 'sms' | 'ivr'>,
    private readonly account: ExotelAccount,
  ) {}

  async send(message: OutgoingMessage, signal?: AbortSignal): Promise<SendResult> {
    const a = this.account;
    const form = new URLSearchParams();
    let resource: string;
    if (this.channel === 'ivr') {
      const appId = message.surveyCall ? a.surveyAppId : a.appId;
      if (!a.callerId || !appId)
        throw new ProviderError(
          `The Exotel account has no caller_id or ${message.surveyCall ? 'survey_flow_app_id' : 'app_id'} for calls.`,
          false,
        );
      resource = 'Calls/connect.json';
      form.set('From', message.to);
      form.set('CallerId', a.callerId);
      form.set('Url', `http://my.exotel.com/${a.sid}/exoml/start_voice/${appId}`);
      if (message.reference) form.set('CustomField', message.reference);
      form.set('StatusCallback', a.callStatusUrl);
      form.set('StatusCallbackEvents[0]', 'terminal');
    } else {
      resource = 'Sms/send.json';
      form.set('From', a.sender);
      form.set('To', message.to);
      form.set('Body', message.body);
      if (a.dltEntityId) form.set('DltEntityId', a.dltEntityId);
      if (message.dltTemplateId) form.set('DltTemplateId', message.dltTemplateId);
      form.set('StatusCallback', a.deliveryUrl);
      if (message.reference) form.set('CustomField', message.reference);
    }
    const answer = await callProvider(
      'Exotel',
      `${a.baseUrl}/v1/Accounts/${encodeURIComponent(a.sid)}/${resource}`,
      {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${a.apiKey}:${a.apiToken}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'application/json',
        },
        body: form.toString(),
      },
      signal,
    );
    const item = (this.channel === 'ivr' ? answer.body.Call : answer.body.SMSMessage) as
      { Sid?: unknown } | undefined;
    if (answer.status < 300 && typeof item?.Sid === 'string' && item.Sid !== '')
      return { providerMessageId: item.Sid };
    const exception = (answer.body.RestException ?? {}) as { Message?: unknown; Code?: unknown };
    const text = providerText(exception.Message ?? answer.body.message);
    const reason = `Exotel answered ${answer.status}${exception.Code ? ` (code ${String(exception.Code)})` : ''}: ${text}`;
    throw ProviderError.of(
      reason,
      errorFor({ status: answer.status, text, retryAfterMs: answer.retryAfterMs }),
    );
  }
}

/**
 * Exotel's answers (https://support.exotel.com/support/solutions/articles/48282-sending-an-sms): 401, and 403
 * other than an insufficient balance (an inactive or expired account), are refused credentials; 400 "Invalid
 * Recipient" is `invalid_recipient`; 429 and any 5xx are retried; anything else refuses the message.
 */
function errorFor(answer: ProviderAnswerFacts): ErrorVerdict {
  const common = httpVerdict(answer);
  if (common) return common;
  if (answer.status === 401 || (answer.status === 403 && !/insufficient balance/i.test(answer.text ?? '')))
    return { error_code: 'auth_failed', retry: false };
  if (answer.status === 400 && /invalid recipient/i.test(answer.text ?? ''))
    return { error_code: 'invalid_recipient', retry: false };
  return { error_code: 'provider_rejected', retry: false };
}

const DLT_CODES = (code: number) => (code >= 23080 && code <= 23084) || (code >= 23181 && code <= 23186);

/** An SMS status callback (`Status`, `DetailedStatus`, `DetailedStatusCode`) as our outcome; undefined while under way. */
export function exotelSmsOutcome(fields: Record<string, string>): ReportOutcome | undefined {
  const status = (fields.Status ?? '').toLowerCase();
  const detail = [fields.DetailedStatus, fields.DetailedStatusCode].filter(Boolean).join(' ');
  const said = `Exotel status ${status}${detail ? ` (${providerText(detail)})` : ''}`;
  if (status === 'sent') return { status: 'delivered' };
  if (status === 'failed_dnd' || status === 'failed-dnd')
    return { status: 'failed', code: 'dnd', error: said };
  if (status === 'failed') {
    const code: MessageErrorCode = DLT_CODES(Number(fields.DetailedStatusCode))
      ? 'dlt_rejected'
      : 'undeliverable';
    return { status: 'failed', code, error: said };
  }
  return undefined;
}

/** A call's status callback: `completed` delivered; `busy`, `no-answer`, `failed` undeliverable. */
export function exotelCallOutcome(fields: Record<string, string>): ReportOutcome | undefined {
  const status = (fields.Status ?? '').toLowerCase();
  if (status === 'completed') return { status: 'delivered' };
  if (['busy', 'no-answer', 'failed'].includes(status))
    return { status: 'failed', code: 'undeliverable', error: `Exotel call status ${status}` };
  return undefined;
}

/**
 * An SMS to an ExoPhone, from the "Send a Reply" applet of an SMS app whose text is our URL: Exotel sends a HEAD
 * and then a GET with `SmsSid`, `From` (the sender, in national form: 09052161119), `To` (the ExoPhone), `Date`
 * and `Body`, and sends the answer's text/plain body back as a reply (empty: none).
 * https://support.exotel.com/support/solutions/articles/45270-send-a-sms-reply-in-response-to-an-incoming-sms
 */
export function exotelInbound(
  fields: Record<string, string>,
): { from: string; body: string; id: string } | undefined {
  if (!fields.From || !fields.Body) return undefined;
  return {
    from: fields.From,
    body: fields.Body,
    id: fields.SmsSid || `exotel:${fields.From}:${fields.Date ?? ''}`,
  };
}

/** Exotel: SMS with DLT ids and IVR calls through an ExoPhone; reports, call statuses, greetings and replies. */
export const exotel: ProviderAdapter = {
  name: 'exotel',
  label: 'Exotel',
  channels: ['sms', 'ivr'],
  fieldText: {
    sid: { label: { en: 'Account SID', hi: 'खाता SID' }, hint_hi: 'Exotel खाते का SID।' },
    sender: {
      label: { en: 'Sender id or ExoPhone', hi: 'सेंडर आईडी या ExoPhone' },
      hint_hi: 'DLT में पंजीकृत सेंडर आईडी, या वह ExoPhone जिससे SMS जाते हैं।',
    },
    caller_id: {
      label: { en: 'Caller id (ExoPhone)', hi: 'कॉलर आईडी (ExoPhone)' },
      hint_hi: 'वह ExoPhone जिससे कॉल आती हैं (IVR)।',
    },
    app_id: {
      label: { en: 'Call flow (app) id', hi: 'कॉल फ़्लो (ऐप) आईडी' },
      hint_hi: 'वह कॉल फ़्लो जिससे कॉल जुड़ती है (IVR)।',
    },
    dlt_entity_id: {
      label: { en: 'DLT entity id', hi: 'DLT एंटिटी आईडी' },
      hint_hi: 'कार्यालय की DLT प्रिंसिपल एंटिटी आईडी।',
    },
    survey_flow_app_id: {
      label: { en: 'Survey call flow id', hi: 'सर्वे कॉल फ़्लो आईडी' },
      hint_hi:
        'सर्वे कॉल का फ़्लो: Gather ऐप्लेट का URL callback_urls.survey_gather और Passthru callback_urls.survey_answer पर (docs/providers.md)।',
    },
    api_key: { label: { en: 'API key', hi: 'API की' }, hint_hi: 'API की।' },
    api_token: { label: { en: 'API token', hi: 'API टोकन' }, hint_hi: 'API टोकन।' },
  },
  settings: Type.Object({
    sid: Type.String({ minLength: 1, maxLength: 500, description: 'The Exotel account SID.' }),
    sender: Type.String({
      minLength: 1,
      maxLength: 500,
      description: 'The DLT-registered sender id, or the ExoPhone SMS go from.',
    }),
    caller_id: Type.Optional(
      Type.String({ minLength: 1, maxLength: 500, description: 'The ExoPhone calls come from (IVR).' }),
    ),
    app_id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 500,
        description: 'The call flow (app) a call is connected to (IVR).',
      }),
    ),
    dlt_entity_id: Type.Optional(
      Type.String({ minLength: 1, maxLength: 500, description: "The office's DLT principal entity id." }),
    ),
    survey_flow_app_id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 500,
        description:
          'The call flow of survey calls: a Gather applet whose URL is callback_urls.survey_gather and a Passthru to callback_urls.survey_answer (docs/providers.md).',
      }),
    ),
  }),
  credentials: Type.Object({
    api_key: Type.String({ minLength: 1, maxLength: 2000, pattern: '^\\S+$', description: 'The API key.' }),
    api_token: Type.String({
      minLength: 1,
      maxLength: 2000,
      pattern: '^\\S+$',
      description: 'The API token.',
    }),
  }),
  channelSettings: { ivr: ['caller_id', 'app_id'] },
  surveyFlowSetting: 'survey_flow_app_id',
  callbacks: [
    'delivery',
    'call_status',
    'greeting',
    'inbound',
    'survey_gather',
    'survey_answer',
    'missed_call',
  ],
  api: { env: 'EXOTEL_BASE_URL', url: 'https://api.exotel.com' },
  errorFor,
  redact: [],
  create: (c) =>
    new ExotelProvider(c.channel === 'ivr' ? 'ivr' : 'sms', {
      baseUrl: c.apiUrl,
      sid: String(c.settings.sid ?? ''),
      apiKey: c.credentials.api_key ?? '',
      apiToken: c.credentials.api_token ?? '',
      sender: String(c.settings.sender ?? ''),
      callerId: text(c.settings.caller_id),
      appId: text(c.settings.app_id),
      surveyAppId: text(c.settings.survey_flow_app_id),
      dltEntityId: text(c.settings.dlt_entity_id),
      deliveryUrl: c.callbackUrl('delivery'),
      callStatusUrl: c.callbackUrl('call_status'),
    }),
  callback(request: CallbackRequest): CallbackResult {
    const fields = { ...request.query, ...request.fields };
    switch (request.kind) {
      case 'greeting':
        // The Greeting applet asks for the call's text: our message id is its CustomField.
        return { speak: { messageRef: fields.CustomField ?? '', callId: fields.CallSid } };
      case 'inbound': {
        // The SMS app's "Send a Reply" URL (a HEAD, then a GET): an empty text/plain answer sends no reply.
        const reply = exotelInbound(fields);
        return {
          replies: reply ? [{ channel: 'sms', ...reply }] : [],
          answer: request.method === 'GET' ? { type: 'text/plain', body: '' } : undefined,
        };
      }
      // A survey call's Gather applet (its dynamic URL) and the Passthru after it, both GET with the call's
      // details as query parameters: CallSid, CallFrom, CallTo, CustomField (our message id, given to
      // Calls/connect) and, at the Passthru, `digits`, which Exotel wraps in double quotes ("2").
      // https://support.exotel.com/support/solutions/articles/3000084635-working-with-gather-applet
      // https://support.exotel.com/support/solutions/articles/48283-working-with-passthru-applet
      case 'survey_gather':
        return { survey: { step: 'gather', messageRef: fields.CustomField ?? '', callId: fields.CallSid } };
      case 'survey_answer':
        return {
          survey: {
            step: 'answer',
            messageRef: fields.CustomField ?? '',
            callId: fields.CallSid,
            digits: (fields.digits ?? '').replace(/^"+|"+$/g, '').trim(),
          },
        };
      // The incoming flow's Passthru: the caller is CallFrom (From on older flows), in national form.
      case 'missed_call':
        return { survey: { step: 'missed_call', from: fields.CallFrom || fields.From || '' } };
      case 'call_status':
        return { reports: [{ providerMessageId: fields.CallSid ?? '', outcome: exotelCallOutcome(fields) }] };
      default:
        return { reports: [{ providerMessageId: fields.SmsSid ?? '', outcome: exotelSmsOutcome(fields) }] };
    }
  },
  answerCall,
};

/**
 * Our answers to Exotel's call flows (docs/providers.md):
 * - the Greeting applet reads the call's text as text/plain;
 * - the Gather applet's dynamic URL reads its version 1.0 JSON: what to say or play, how many keys to take;
 * - a Passthru goes on by its answer's status: 200 while questions remain (the flow goes back to the Gather),
 *   302 once the survey is done (the flow goes on to its goodbye); the missed-call Passthru is answered 200.
 * https://support.exotel.com/support/solutions/articles/3000084635-working-with-gather-applet
 */
function answerCall(answer: CallAnswer): CallbackAnswer {
  switch (answer.kind) {
    case 'say':
      return { type: 'text/plain', body: answer.text };
    case 'ask':
      return {
        type: 'application/json',
        body: JSON.stringify({
          gather_prompt: answer.prompt,
          max_input_digits: answer.digits,
          finish_on_key: '#',
          input_timeout: answer.waitSeconds,
          repeat_menu: answer.repeats,
          repeat_gather_prompt: answer.prompt,
        }),
      };
    case 'answered':
      return { status: answer.more ? 200 : 302, type: 'text/plain', body: answer.more ? 'next' : 'done' };
    case 'missed_call':
      return { type: 'text/plain', body: answer.started ? 'started' : 'ignored' };
  }
}

const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
