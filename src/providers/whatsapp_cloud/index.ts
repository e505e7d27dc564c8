import { createHmac } from 'node:crypto';
import { sameText } from '../../lib/crypto.ts';
import { Type } from 'typebox';
import type { MessageErrorCode } from '../../domain.ts';
import {
  CallbackRefused,
  type CallbackRequest,
  type CallbackResult,
  type ErrorVerdict,
  type ProviderAdapter,
  type ProviderAnswerFacts,
} from '../adapter.ts';
import { callProvider, providerText, withoutPlus } from '../http.ts';
import {
  type MessageProvider,
  type OutgoingMessage,
  ProviderError,
  type ReportOutcome,
  type SendResult,
} from '../provider.ts';

export interface WhatsAppCloudAccount {
  baseUrl: string;
  version: string;
  phoneNumberId: string;
  accessToken: string;
}

/** Graph API error codes (https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes). */
/** Throttling: the API's call rate (4, 80007), the number's rate (130429), spam rate (131048), a pair's (131056). */
const RETRIED = new Set([4, 80007, 130429, 131048, 131056]);
/** The token is refused or lacks a permission: 0 (AuthException), 3, 10, 190, 200-299; 131031 (account locked). */
const AUTH = (code: number) => [0, 3, 10, 190, 131031].includes(code) || (code >= 200 && code <= 299);
function whatsappErrorCode(code: number): MessageErrorCode {
  if (AUTH(code)) return 'auth_failed';
  if (code === 131047) return 'outside_session';
  if (code === 131026) return 'undeliverable';
  // The recipient is not a WhatsApp user we may reach (a test number's allowed list; the sender itself).
  if (code === 131030 || code === 131021) return 'invalid_recipient';
  return 'provider_rejected';
}

/**
 * Meta's WhatsApp Cloud API: `POST /{version}/{phone_number_id}/messages` with a Bearer token; free text, or an
 * approved template (its name and language, the body's parameters in order) for a template of ours that has
 * `provider_template_ids.whatsapp_cloud`. The answer's `messages[0].id` (wamid) is the provider id that the
 * webhook's statuses name.
 */
export class WhatsAppCloudProvider implements MessageProvider {
  readonly name = 'whatsapp_cloud';
  readonly channel = 'whatsapp' as const;

  constructor(private readonly account: WhatsAppCloudAccount) {}

  async send(message: OutgoingMessage, signal?: AbortSignal): Promise<SendResult> {
    const a = this.account;
    const template = message.providerTemplate;
    const name = template?.ids.whatsapp_cloud;
    const payload =
      template && name
        ? {
            messaging_product: 'whatsapp',
            recipient_type: 'individual',
            to: withoutPlus(message.to),
            type: 'template',
            template: {
              name,
              language: { code: template.language },
              components: [
                {
                  type: 'body',
                  parameters: template.variables.map(([, text]) => ({ type: 'text', text })),
                },
              ],
            },
          }
        : {
            messaging_product: 'whatsapp',
            recipient_type: 'individual',
            to: withoutPlus(message.to),
            type: 'text',
            text: { body: message.body },
          };
    const answer = await callProvider(
      'WhatsApp Cloud API',
      `${a.baseUrl}/${a.version}/${encodeURIComponent(a.phoneNumberId)}/messages`,
      {
        method: 'POST',
        headers: {
          authorization: `Bearer ${a.accessToken}`,
          'content-type': 'application/json',
          accept: 'application/json',
        },
        body: JSON.stringify(payload),
      },
      signal,
    );
    const messages = answer.body.messages as Array<{ id?: unknown }> | undefined;
    const id = Array.isArray(messages) ? messages[0]?.id : undefined;
    if (answer.status < 300 && typeof id === 'string' && id !== '') return { providerMessageId: id };
    const error = (answer.body.error ?? {}) as {
      code?: unknown;
      message?: unknown;
      error_data?: { details?: unknown };
    };
    const code = Number(error.code);
    const details = error.error_data?.details;
    const reason =
      `WhatsApp Cloud API answered ${answer.status}${Number.isFinite(code) ? ` (code ${code})` : ''}: ` +
      providerText(details ? `${providerText(error.message)}: ${providerText(details)}` : error.message);
    throw ProviderError.of(
      reason,
      errorFor({
        status: answer.status,
        code: Number.isFinite(code) ? String(code) : undefined,
        retryAfterMs: answer.retryAfterMs,
      }),
    );
  }
}

/**
 * The Graph API's answers: throttling (130429, 131056) and 429 are retried after Retry-After; a 5xx is retried
 * whatever its body says (Meta puts Graph codes on its outages too), unless the code refuses the credentials
 * (190); otherwise the code decides.
 */
function errorFor(answer: ProviderAnswerFacts): ErrorVerdict {
  const code = Number(answer.code);
  if (RETRIED.has(code) || answer.status === 429)
    return { error_code: 'rate_limited', retry: true, after_ms: answer.retryAfterMs };
  if (answer.status >= 500 && whatsappErrorCode(code) !== 'auth_failed')
    return { error_code: 'provider_rejected', retry: true, after_ms: answer.retryAfterMs };
  return { error_code: whatsappErrorCode(code), retry: false };
}

/** `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>` with the app secret, compared in constant time. */
export function verifyMetaSignature(appSecret: string, rawBody: string, header: string | undefined): boolean {
  if (!header?.startsWith('sha256=')) return false;
  return sameText(
    createHmac('sha256', appSecret).update(rawBody, 'utf8').digest('hex'),
    header.slice('sha256='.length),
  );
}

export interface WhatsAppStatus {
  id: string;
  status: string;
  errors: Array<{ code?: unknown; title?: unknown; message?: unknown }>;
}
export interface WhatsAppInbound {
  id: string;
  from: string;
  body: string;
  name: string | undefined;
}

/** The statuses and the text messages of a webhook notification (`entry[].changes[].value`). */
export function whatsappNotification(body: unknown): {
  statuses: WhatsAppStatus[];
  messages: WhatsAppInbound[];
} {
  const statuses: WhatsAppStatus[] = [];
  const messages: WhatsAppInbound[] = [];
  const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
  const obj = (v: unknown): Record<string, unknown> =>
    v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  for (const entry of list(obj(body).entry)) {
    for (const change of list(obj(entry).changes)) {
      const value = obj(obj(change).value);
      for (const s of list(value.statuses)) {
        const status = obj(s);
        if (typeof status.id === 'string' && typeof status.status === 'string')
          statuses.push({ id: status.id, status: status.status, errors: list(status.errors).map(obj) });
      }
      const names = new Map<string, string>();
      for (const c of list(value.contacts)) {
        const contact = obj(c);
        const name = obj(contact.profile).name;
        if (typeof contact.wa_id === 'string' && typeof name === 'string') names.set(contact.wa_id, name);
      }
      const firstName = (() => {
        const name = obj(obj(list(value.contacts)[0]).profile).name;
        return typeof name === 'string' ? name : undefined;
      })();
      for (const m of list(value.messages)) {
        const message = obj(m);
        const text = replyText(message, obj);
        if (typeof message.id !== 'string' || typeof message.from !== 'string') continue;
        if (typeof text !== 'string') continue;
        messages.push({
          id: message.id,
          from: message.from,
          body: text,
          name: names.get(message.from) ?? firstName,
        });
      }
    }
  }
  return { statuses, messages };
}

/**
 * What a message says: a text's body, or the label of the button the voter tapped: a template's quick-reply
 * button (`type: "button"`, `button: { payload, text }`:
 * https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/messages/button/)
 * or an interactive reply button (`interactive.button_reply.title`). A survey's first question goes as its
 * template, whose buttons answer it. Other kinds (media, locations) carry no text.
 */
function replyText(
  message: Record<string, unknown>,
  obj: (v: unknown) => Record<string, unknown>,
): string | undefined {
  const text =
    message.type === 'text'
      ? obj(message.text).body
      : message.type === 'button'
        ? obj(message.button).text
        : message.type === 'interactive'
          ? obj(obj(message.interactive).button_reply).title
          : undefined;
  return typeof text === 'string' ? text : undefined;
}

/** A status as our outcome: `delivered` and `read` delivered; `failed` by its error code; `sent` nothing new. */
export function whatsappOutcome(status: WhatsAppStatus): ReportOutcome | undefined {
  if (status.status === 'delivered' || status.status === 'read') return { status: 'delivered' };
  if (status.status !== 'failed') return undefined;
  const first = status.errors[0] ?? {};
  const code = Number(first.code);
  const text = providerText(first.message ?? first.title);
  return {
    status: 'failed',
    code: RETRIED.has(code) ? 'rate_limited' : whatsappErrorCode(code),
    error: `WhatsApp Cloud API reported failed${Number.isFinite(code) ? ` (code ${code})` : ''}: ${text}`,
  };
}

/** Meta's WhatsApp Cloud API: free text and approved templates, one signed webhook for statuses and replies. */
export const whatsappCloud: ProviderAdapter = {
  name: 'whatsapp_cloud',
  label: 'WhatsApp Cloud API',
  channels: ['whatsapp'],
  fieldText: {
    phone_number_id: {
      label: { en: 'Phone number id', hi: 'फ़ोन नंबर आईडी' },
      hint_hi: 'Meta के WhatsApp Manager में व्यवसाय के फ़ोन नंबर की आईडी।',
    },
    waba_id: {
      label: { en: 'WhatsApp Business Account id', hi: 'WhatsApp बिज़नेस खाता आईडी' },
      hint_hi: 'WhatsApp बिज़नेस खाते की आईडी।',
    },
    access_token: {
      label: { en: 'Access token', hi: 'एक्सेस टोकन' },
      hint_hi: 'सिस्टम यूज़र का स्थायी एक्सेस टोकन।',
    },
    app_secret: {
      label: { en: 'App secret', hi: 'ऐप सीक्रेट' },
      hint_hi: 'Meta ऐप का सीक्रेट: वेबहुक सूचनाएँ इसी से साइन होती हैं।',
    },
  },
  templatesOnly: ['whatsapp'],
  settings: Type.Object({
    phone_number_id: Type.String({
      minLength: 1,
      maxLength: 500,
      description: "The business phone number's id in Meta's WhatsApp Manager.",
    }),
    waba_id: Type.Optional(
      Type.String({ minLength: 1, maxLength: 500, description: 'The WhatsApp Business Account id.' }),
    ),
  }),
  credentials: Type.Object({
    access_token: Type.String({
      minLength: 1,
      maxLength: 2000,
      pattern: '^\\S+$',
      description: "A system user's permanent access token.",
    }),
    app_secret: Type.String({
      minLength: 1,
      maxLength: 2000,
      pattern: '^\\S+$',
      description: "The Meta app's secret: webhook notifications are signed with it.",
    }),
  }),
  callbacks: ['webhook'],
  templates: {
    sends: 'also',
    idLabel: "The approved WhatsApp template's name, used with the template's language",
    idLabelHi: 'स्वीकृत WhatsApp टेम्पलेट का नाम, टेम्पलेट की भाषा के साथ इस्तेमाल होता है',
    maxLength: 512,
  },
  verifyToken: true,
  api: { env: 'WHATSAPP_CLOUD_BASE_URL', url: 'https://graph.facebook.com' },
  env: {
    WHATSAPP_CLOUD_API_VERSION: ['v23.0', /^v\d{1,3}\.\d{1,3}$/, 'a Graph API version such as v23.0'],
  },
  errorFor,
  redact: [],
  create: (c) =>
    new WhatsAppCloudProvider({
      baseUrl: c.apiUrl,
      version: c.env.WHATSAPP_CLOUD_API_VERSION ?? 'v23.0',
      phoneNumberId: String(c.settings.phone_number_id ?? ''),
      accessToken: c.credentials.access_token ?? '',
    }),
  callback(request: CallbackRequest): CallbackResult {
    if (request.method === 'GET') {
      // The webhook's verification: hub.verify_token must be the account's verify_token.
      const given = request.query['hub.verify_token'] ?? '';
      if (
        request.verifyToken === undefined ||
        request.query['hub.mode'] !== 'subscribe' ||
        !sameText(request.verifyToken, given)
      )
        throw new CallbackRefused("hub.verify_token does not match the account's verify_token.");
      return { answer: { type: 'text/plain', body: request.query['hub.challenge'] ?? '' } };
    }
    if (
      !verifyMetaSignature(
        request.credentials.app_secret ?? '',
        request.raw,
        request.header('x-hub-signature-256'),
      )
    )
      throw new CallbackRefused(
        "The X-Hub-Signature-256 does not match this request and the account's app_secret.",
      );
    const { statuses, messages } = whatsappNotification(request.body);
    return {
      reports: statuses.map((status) => ({ providerMessageId: status.id, outcome: whatsappOutcome(status) })),
      replies: messages.map((m) => ({
        channel: 'whatsapp',
        from: `+${m.from}`,
        body: m.body,
        id: m.id,
        name: m.name,
      })),
    };
  },
};
