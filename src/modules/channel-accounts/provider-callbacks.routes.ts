import { timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Kysely } from 'kysely';
import formbody from '@fastify/formbody';
import { Type } from 'typebox';
import { nowIso } from '../../db/connect.ts';
import type { ChannelAccountRow, Database, MessageRow } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import { Success } from '../../http/schemas.ts';
import { type AccountProviders, publicBase } from '../../providers/accounts.ts';
import { exotelCallOutcome, exotelInbound, exotelSmsOutcome } from '../../providers/exotel.ts';
import { msg91Inbound, msg91Outcome, msg91Reports } from '../../providers/msg91.ts';
import type { ReportOutcome } from '../../providers/provider.ts';
import { twilioOutcome, verifyTwilioSignature } from '../../providers/twilio.ts';
import { optOutByProvider, TWILIO_UNSUBSCRIBED } from '../opt-outs/opt-outs.service.ts';
import {
  verifyMetaSignature,
  whatsappNotification,
  whatsappOutcome,
} from '../../providers/whatsapp-cloud.ts';
import type { InboundService } from '../inbound/inbound.service.ts';
import { messageById, messagesByProviderIds, noteSentStatus } from '../messages/messages.repository.ts';
import { parseRef } from '../messages/messages.rules.ts';
import type { MessagesService } from '../messages/messages.service.ts';
import { accountById } from './channel-accounts.repository.ts';
import { type CallbackKind, providerSpecs } from './channel-accounts.rules.ts';

const Params = Type.Object({
  provider: Type.String({ maxLength: 20 }),
  account: Type.String({ maxLength: 40, description: '`cha_<n>`' }),
  token: Type.String({ maxLength: 100 }),
  kind: Type.String({ maxLength: 20, description: 'delivery, call_status, greeting or webhook.' }),
});

/** A body as this plugin's parsers give it: JSON (with its raw text, for signatures), form fields, or text. */
interface Parsed {
  raw: string;
  value: unknown;
}

/** The most messages and reports one callback body may carry (more is 413). */
export const MAX_CALLBACK_ITEMS = 1000;
/** A callback body is applied in slices of at most this much time, each followed by a turn for other requests. */
const SLICE_MS = 20;

function tooMany(count: number): void {
  if (count > MAX_CALLBACK_ITEMS)
    throw new AppError(
      'payload_too_large',
      `This body carries ${count} messages and reports; one body may carry at most ${MAX_CALLBACK_ITEMS}. Nothing was applied: send them in smaller bodies.`,
    );
}

/**
 * Runs `each` over `items` in slices of about SLICE_MS, giving the event loop a turn between slices: on SQLite
 * every statement runs on the one thread, and a loop over a large body would hold every other request.
 */
async function inSlices<T>(
  items: readonly T[],
  size: number,
  each: (slice: T[]) => Promise<void>,
): Promise<void> {
  let since = performance.now();
  for (let i = 0; i < items.length; i += size) {
    await each(items.slice(i, i + size));
    if (performance.now() - since >= SLICE_MS) {
      await new Promise((resolve) => setImmediate(resolve));
      since = performance.now();
    }
  }
}

const sameText = (a: string, b: string) => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

const fieldsOf = (value: unknown): Record<string, string> =>
  value && typeof value === 'object' && !Array.isArray(value)
    ? Object.fromEntries(
        Object.entries(value as Record<string, unknown>).map(([k, v]) => [
          k,
          v === null || v === undefined ? '' : String(v),
        ]),
      )
    : {};

/**
 * The callback URLs of channel accounts: `/api/providers/<provider>/cha_<n>/<token>/<kind>`, as each account's
 * `callback_urls` lists them. The token (a secret per account) is checked in constant time, and a provider
 * that signs its requests (Meta, Twilio) is verified as well: a wrong token or signature is 401 and changes
 * nothing. Reports go through the message lifecycle's conditional updates, so a repeated or late report never
 * moves a message back.
 */
export const providerCallbackRoutes: FastifyPluginAsyncTypebox<{
  db: Kysely<Database>;
  accounts: AccountProviders;
  messages: MessagesService;
  inbound: InboundService;
  publicBaseUrl: string | undefined;
  port: number;
}> = async (app, deps) => {
  const { db, accounts, messages, inbound } = deps;
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'string', bodyLimit: 1024 * 1024 },
    (_r, body, done) => {
      const raw = typeof body === 'string' ? body : body.toString('utf8');
      try {
        done(null, { raw, value: raw.trim() === '' ? {} : (JSON.parse(raw) as unknown) } satisfies Parsed);
      } catch {
        done(new AppError('bad_request', 'The body is not valid JSON.'), undefined);
      }
    },
  );
  await app.register(formbody, {
    parser: (raw) => ({ raw, value: Object.fromEntries(new URLSearchParams(raw)) }) satisfies Parsed,
  });
  app.addContentTypeParser('*', { parseAs: 'string' }, (_r, body, done) => {
    const raw = typeof body === 'string' ? body : body.toString('utf8');
    done(null, { raw, value: {} } satisfies Parsed);
  });

  /** The account the URL names, when its token (and provider and kind) match; 401 otherwise. */
  async function accountOf(params: { provider: string; account: string; token: string; kind: string }) {
    const id = parseRef('cha', params.account);
    const row = id === undefined ? undefined : await accountById(db, id);
    const kinds = row ? (providerSpecs[row.provider].callbacks as readonly string[]) : [];
    // Undefined when the token was sealed under another APP_KEY: no URL of the account is valid then.
    const token = row ? accounts.callbackToken(row) : undefined;
    if (
      !row ||
      row.provider !== params.provider ||
      !kinds.includes(params.kind) ||
      token === undefined ||
      !sameText(token, params.token)
    ) {
      throw new AppError(
        'unauthorized',
        "This callback URL is not valid: copy it again from the account's callback_urls.",
      );
    }
    return { row, kind: params.kind as CallbackKind };
  }

  /** Applies outcomes to the account's messages they name (never another account's), a slice at a time. */
  async function apply(
    row: ChannelAccountRow,
    found: Array<{ message: MessageRow | undefined; outcome: ReportOutcome | undefined }>,
  ) {
    let applied = 0;
    await inSlices(found, 50, async (slice) => void (applied += await applySlice(row, slice)));
    return applied;
  }

  async function applySlice(
    row: ChannelAccountRow,
    found: Array<{ message: MessageRow | undefined; outcome: ReportOutcome | undefined }>,
  ) {
    let applied = 0;
    const notes: Array<{ id: number; error: string }> = [];
    const reports = [];
    for (const { message, outcome } of found) {
      if (!message || !outcome || message.channel_account_id !== row.id) continue;
      applied += 1;
      if (outcome.status === 'sent') notes.push({ id: message.id, error: outcome.error });
      else if (outcome.status === 'delivered')
        reports.push({ messageId: message.id, status: 'delivered' as const });
      else
        reports.push({
          messageId: message.id,
          status: 'failed' as const,
          error: outcome.error,
          errorCode: outcome.code,
        });
    }
    await messages.applyReports(reports);
    // A status that is neither delivered nor failed is kept in error_message while the message stays sent.
    for (const note of notes) await noteSentStatus(db, note.id, note.error, nowIso());
    return applied;
  }

  const byProviderIds = (accountId: number, ids: string[]) => messagesByProviderIds(db, accountId, ids);

  /** An SMS reply to an MSG91 or Exotel account (`callback_urls.inbound`): it joins conversations, STOP works. */
  async function smsReply(row: ChannelAccountRow, fields: Record<string, string>, ip: string | null) {
    const reply = row.provider === 'msg91' ? msg91Inbound(fields) : exotelInbound(fields);
    if (!reply) return 0;
    const stored = await inbound.receiveForAccount(
      row.workspace_id,
      {
        channel: 'sms',
        from: reply.from,
        body: reply.body.slice(0, 5000),
        providerMessageId: reply.id.slice(0, 128),
        channelAccountId: row.id,
      },
      row.provider,
      ip,
    );
    return stored ? 1 : 0;
  }

  const schema = {
    tags: ['Provider callbacks'],
    params: Params,
    security: [],
  };

  app.get(
    '/providers/:provider/:account/:token/:kind',
    {
      config: { permission: 'public', rateLimit: 'callback' },
      schema: {
        ...schema,
        summary:
          "A channel account's GET callbacks: Exotel's greeting text, SMS replies, the WhatsApp webhook's verification",
        description:
          "`exotel` `greeting`: `CallSid` and `CustomField` (our message id) answer the message's text as text/plain, 404 " +
          'for an unknown call. `exotel` `inbound` (the SMS app\'s "Send a Reply" URL: `SmsSid`, `From`, `To`, `Date`, ' +
          '`Body`) and `msg91` `inbound` (its inbound SMS forwarding: `number`, `message`, ...): a reply, answered with ' +
          "an empty text/plain (no automatic reply). `whatsapp_cloud` `webhook`: `hub.mode=subscribe`, `hub.verify_token` (the account's " +
          '`verify_token`) and `hub.challenge` answer the challenge as text/plain.',
        querystring: Type.Object(
          {
            'hub.mode': Type.Optional(Type.String({ maxLength: 40 })),
            'hub.verify_token': Type.Optional(Type.String({ maxLength: 200 })),
            'hub.challenge': Type.Optional(Type.String({ maxLength: 200 })),
            CallSid: Type.Optional(Type.String({ maxLength: 100 })),
            CustomField: Type.Optional(Type.String({ maxLength: 100 })),
            From: Type.Optional(Type.String({ maxLength: 40 })),
            Body: Type.Optional(Type.String({ maxLength: 5000 })),
          },
          {
            additionalProperties: true,
            description: 'Other fields the provider adds (Exotel passes a dozen) are ignored.',
          },
        ),
        produces: ['text/plain'],
        response: {
          200: { description: 'Text.', content: { 'text/plain': { schema: { type: 'string' } } } },
        },
      },
    },
    async (request, reply) => {
      const { row, kind } = await accountOf(request.params);
      const query = request.query as Record<string, string>;
      if (kind === 'webhook') {
        const expected = accounts.verifyToken(row);
        if (
          expected === undefined ||
          query['hub.mode'] !== 'subscribe' ||
          !sameText(expected, query['hub.verify_token'] ?? '')
        )
          throw new AppError('unauthorized', "hub.verify_token does not match the account's verify_token.");
        return reply.type('text/plain').send(query['hub.challenge'] ?? '');
      }
      if (kind === 'inbound') {
        // Exotel's SMS app (a HEAD first, then this GET) and MSG91's forwarding by GET: an empty text/plain
        // answer sends no automatic reply.
        await smsReply(row, fieldsOf(query), request.ip ?? null);
        return reply.type('text/plain').send('');
      }
      if (kind === 'greeting') {
        const id = parseRef('msg', query.CustomField ?? '');
        const message = id === undefined ? undefined : await messageById(db, id);
        const known =
          message &&
          message.channel_account_id === row.id &&
          message.channel === 'ivr' &&
          (message.provider_message_id === null || message.provider_message_id === query.CallSid);
        if (!known)
          throw new AppError('not_found', 'No call of this account has that CallSid and CustomField.');
        return reply.type('text/plain').send(message.body);
      }
      throw new AppError('method_not_allowed', `The ${kind} callback takes POST.`);
    },
  );

  app.post(
    '/providers/:provider/:account/:token/:kind',
    {
      config: { permission: 'public', rateLimit: 'callback' },
      schema: {
        ...schema,
        summary: "A channel account's delivery reports and inbound messages",
        description:
          '`msg91` `delivery` (form `data` or JSON), `exotel` `delivery` and `call_status` (form), `whatsapp_cloud` ' +
          '`webhook` (JSON signed with X-Hub-Signature-256), `twilio` `delivery` (form signed with X-Twilio-Signature), ' +
          '`msg91` `inbound` (a forwarded SMS reply: form or JSON `number`, `message`). ' +
          'See docs/providers.md for each status mapping. One body carries at most 1,000 messages and reports (more is 413, and nothing is applied).',
        querystring: Type.Object(
          { message: Type.Optional(Type.String({ maxLength: 40, description: 'Twilio: our message id.' })) },
          { additionalProperties: true },
        ),
        response: {
          200: Success(
            Type.Object({
              applied: Type.Integer({ description: 'Reports and messages taken from the request.' }),
            }),
          ),
        },
      },
    },
    async (request) => {
      const { row, kind } = await accountOf(request.params);
      const body = (request.body as Parsed | undefined) ?? { raw: '', value: {} };
      let applied = 0;
      if (kind === 'inbound') {
        applied = await smsReply(
          row,
          { ...fieldsOf(request.query), ...fieldsOf(body.value) },
          request.ip ?? null,
        );
      } else if (row.provider === 'msg91') {
        const reports = msg91Reports(body.value);
        tooMany(reports.length);
        // A Flow request's id covers every number it carried: each report is its id and number.
        const sent = new Map(
          (
            await byProviderIds(
              row.id,
              reports.map((r) => r.requestId),
            )
          ).map((m) => [`${m.provider_message_id}|${m.to}`, m]),
        );
        applied = await apply(
          row,
          reports.map((report) => ({
            message: sent.get(`${report.requestId}|+${report.number.replace(/^\+/, '')}`),
            outcome: msg91Outcome(report),
          })),
        );
      } else if (row.provider === 'exotel') {
        const fields = fieldsOf(body.value);
        const sid = kind === 'call_status' ? fields.CallSid : fields.SmsSid;
        const outcome = kind === 'call_status' ? exotelCallOutcome(fields) : exotelSmsOutcome(fields);
        if (sid) applied = await apply(row, [{ message: (await byProviderIds(row.id, [sid]))[0], outcome }]);
      } else if (row.provider === 'whatsapp_cloud') {
        const signature = request.headers['x-hub-signature-256'];
        const secret = accounts.credentials(row).app_secret ?? '';
        if (!verifyMetaSignature(secret, body.raw, typeof signature === 'string' ? signature : undefined))
          throw new AppError(
            'unauthorized',
            "The X-Hub-Signature-256 does not match this request and the account's app_secret.",
          );
        const { statuses, messages: received } = whatsappNotification(body.value);
        tooMany(statuses.length + received.length);
        const sent = new Map(
          (
            await byProviderIds(
              row.id,
              statuses.map((st) => st.id),
            )
          ).map((m) => [m.provider_message_id, m]),
        );
        applied = await apply(
          row,
          statuses.map((status) => ({ message: sent.get(status.id), outcome: whatsappOutcome(status) })),
        );
        await inSlices(received, 1, async ([message]) => {
          const stored = await inbound.receiveForAccount(
            row.workspace_id,
            {
              channel: 'whatsapp',
              from: `+${message!.from}`,
              body: message!.body.slice(0, 5000),
              providerMessageId: message!.id.slice(0, 128),
              channelAccountId: row.id,
            },
            'whatsapp_cloud',
            request.ip ?? null,
          );
          if (stored) applied += 1;
        });
      } else if (row.provider === 'twilio') {
        const fields = fieldsOf(body.value);
        const url = `${publicBase(deps)}${request.originalUrl}`;
        const signature = request.headers['x-twilio-signature'];
        const token = accounts.credentials(row).auth_token ?? '';
        if (!verifyTwilioSignature(token, url, fields, typeof signature === 'string' ? signature : undefined))
          throw new AppError(
            'unauthorized',
            "The X-Twilio-Signature does not match this request and the account's auth_token.",
          );
        const id = parseRef('msg', (request.query as Record<string, string>).message ?? '');
        const message = id === undefined ? undefined : await messageById(db, id);
        applied = await apply(row, [{ message, outcome: twilioOutcome(fields) }]);
        // As on the deployment's Twilio callback: the recipient told Twilio to stop (STOP to the number).
        if (applied > 0 && message && fields.ErrorCode === TWILIO_UNSUBSCRIBED)
          await optOutByProvider(db, message.id);
      }
      return { success: true as const, data: { applied } };
    },
  );
};
