import formbody from '@fastify/formbody';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import type { ChannelAccountRow, Database } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import { nestsDeeperThan, tooDeep } from '../../lib/json.ts';
import {
  CallbackRefused,
  type CallbackAnswer,
  type CallbackKind,
  type CallbackResult,
  fieldsOf,
  type ProviderAdapter,
} from '../../providers/adapter.ts';
import type { AccountProviders } from '../sending/accounts.ts';
import { channelLogFor, type LogKind } from '../sending/channel-log.ts';

/**
 * The HTTP side of providers' callbacks, apart from the routes (provider-callbacks.routes.ts): the bodies as
 * the adapters read them, the adapter's reading of a request, the answer, and the channel log of each call.
 */

/**
 * A body as this plugin's parsers give it: its raw text (signatures are over it) and how to read it (JSON, form
 * fields, or nothing). JSON is read only when the adapter asks for it: after the signature was checked, where the
 * provider signs the raw body, so an outsider's body costs no parse.
 */
export interface Parsed {
  raw: string;
  read: () => unknown;
}

/** JSON read once, on first use; a body that is not JSON is 400. */
function jsonOnce(raw: string): () => unknown {
  let value: unknown;
  let done = false;
  return () => {
    if (!done) {
      try {
        value = raw.trim() === '' ? {} : (JSON.parse(raw) as unknown);
      } catch {
        throw new AppError('bad_request', 'The body is not valid JSON.');
      }
      done = true;
    }
    return value;
  };
}

/** Kinds a provider calls with GET (a challenge, a call's text, a forwarded reply); the others take POST. */
const GET_KINDS: readonly CallbackKind[] = [
  'webhook',
  'greeting',
  'inbound',
  'survey_gather',
  'survey_answer',
  'missed_call',
];

/** A callback's kind as the channel log names it. */
const LOG_KIND: Record<CallbackKind, LogKind> = {
  delivery: 'status',
  call_status: 'status',
  status: 'status',
  webhook: 'status',
  greeting: 'send',
  inbound: 'inbound',
  missed_call: 'inbound',
  survey_gather: 'survey',
  survey_answer: 'survey',
};

/** A callback URL that names no account, or with a wrong token: 401, the same for every case. */
export const invalidUrl = () =>
  new AppError(
    'unauthorized',
    "This callback URL is not valid: copy it again from the account's callback_urls.",
  );

/**
 * The callbacks' own body parsers: JSON (at most 1 MB, refused past MAX_JSON_DEPTH before it is parsed), forms,
 * and anything else as text; each keeps the raw body, which signatures are over.
 */
export async function installCallbackParsers(app: FastifyInstance): Promise<void> {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'string', bodyLimit: 1024 * 1024 },
    (_r, body, done) => {
      const raw = typeof body === 'string' ? body : body.toString('utf8');
      if (nestsDeeperThan(raw)) return done(new AppError('bad_request', tooDeep), undefined);
      done(null, { raw, read: jsonOnce(raw) } satisfies Parsed);
    },
  );
  await app.register(formbody, {
    parser: (raw) => {
      const value = Object.fromEntries(new URLSearchParams(raw));
      return { raw, read: () => value } satisfies Parsed;
    },
  });
  app.addContentTypeParser('*', { parseAs: 'string' }, (_r, body, done) => {
    const raw = typeof body === 'string' ? body : body.toString('utf8');
    done(null, { raw, read: () => ({}) } satisfies Parsed);
  });
}

/**
 * Keeps each account callback that carried the right URL token in the channel log, once its answer is sent: the
 * request (its body, or its query for a GET) and our answer, redacted. `note` marks a request to be logged.
 */
export function logCallbacks(
  app: FastifyInstance,
  deps: { db: Kysely<Database>; accounts: AccountProviders; base: string },
): { note(request: FastifyRequest, row: ChannelAccountRow, kind: CallbackKind): void } {
  const { db, accounts } = deps;
  // The channel log of an account's callbacks: the request (body, or query for a GET) and our answer.
  const logged = new WeakMap<
    FastifyRequest,
    { row: ChannelAccountRow; kind: CallbackKind; started: number; at: string }
  >();
  const secretsOf = (row: ChannelAccountRow): string[] => {
    const token = accounts.callbackToken(row) ?? '';
    try {
      return [...accounts.secrets(row), token];
    } catch {
      return [token];
    }
  };
  app.addHook('onSend', (request, reply, payload, done) => {
    const entry = logged.get(request);
    if (entry) {
      const raw = (request.body as Parsed | undefined)?.raw ?? '';
      const query = request.url.includes('?') ? (request.url.split('?')[1] ?? '') : '';
      channelLogFor(db).add(
        entry.row,
        LOG_KIND[entry.kind],
        [
          {
            at: entry.at,
            method: request.method,
            url: `${deps.base}${request.originalUrl}`,
            status: reply.statusCode,
            durationMs: performance.now() - entry.started,
            request: raw || query,
            response: typeof payload === 'string' ? payload : '',
          },
        ],
        {
          messageId: null,
          errorCode: null,
          secrets: secretsOf(entry.row),
          direction: 'in',
        },
      );
    }
    done(null, payload);
  });
  return {
    note: (request, row, kind) =>
      logged.set(request, { row, kind, started: performance.now(), at: nowIso() }),
  };
}

/** The adapter's reading of the request; its refusal is 401 (an account's URL) or 403 (the deployment's). */
export async function readCallback(
  adapter: ProviderAdapter,
  kind: CallbackKind,
  request: FastifyRequest,
  secrets: { credentials: Readonly<Record<string, string>>; verifyToken: string | undefined; base: string },
  refusal: 'unauthorized' | 'forbidden',
): Promise<CallbackResult> {
  if (!adapter.callback) throw invalidUrl();
  const method = request.method === 'GET' || request.method === 'HEAD' ? 'GET' : 'POST';
  if (method === 'GET' && !GET_KINDS.includes(kind))
    throw new AppError('method_not_allowed', `The ${kind} callback takes POST.`);
  if (method === 'POST' && (kind === 'greeting' || kind.startsWith('survey_') || kind === 'missed_call'))
    throw new AppError('method_not_allowed', `The ${kind} callback takes GET.`);
  const body = (request.body as Parsed | undefined) ?? { raw: '', read: () => ({}) };
  let fields: Record<string, string> | undefined;
  try {
    return await adapter.callback({
      kind,
      method,
      raw: body.raw,
      get body() {
        return body.read();
      },
      get fields() {
        fields ??= fieldsOf(body.read());
        return fields;
      },
      query: fieldsOf(request.query),
      header: (name) => {
        const value = request.headers[name];
        return typeof value === 'string' ? value : undefined;
      },
      url: `${secrets.base}${request.originalUrl}`,
      credentials: secrets.credentials,
      verifyToken: secrets.verifyToken,
    });
  } catch (error) {
    if (error instanceof CallbackRefused) throw new AppError(refusal, error.message);
    throw error;
  }
}

/** The adapter's own answer where it gives one (a challenge, an empty XML reply), else `{ applied }`. */
export function sendAnswer(reply: FastifyReply, given: CallbackAnswer | undefined, applied?: number) {
  if (given)
    return reply
      .code(given.status ?? 200)
      .type(given.type)
      .send(given.body);
  return reply.send({ success: true as const, data: { applied: applied ?? 0 } });
}
