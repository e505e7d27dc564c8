import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import formbody from '@fastify/formbody';
import { Type } from 'typebox';
import type { DeploymentAccount } from '../../config.ts';
import { nowIso } from '../../db/connect.ts';
import type { ChannelAccountRow, Database, MessageRow } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import { Success } from '../../http/schemas.ts';
import { sameText } from '../../lib/crypto.ts';
import { FairGate } from '../../lib/fair-gate.ts';
import { channelLogFor, type LogKind } from '../sending/channel-log.ts';
import { nestsDeeperThan, tooDeep } from '../../lib/json.ts';
import { type AccountProviders, publicBase } from '../../providers/accounts.ts';
import {
  CallbackRefused,
  type CallbackKind,
  type CallbackReport,
  type CallbackResult,
  fieldsOf,
  type ProviderAdapter,
} from '../../providers/adapter.ts';
import type { ReportOutcome } from '../../providers/provider.ts';
import { adapterOf, adapters } from '../../providers/registry.ts';
import { optOutByProvider } from '../opt-outs/opt-outs.service.ts';
import type { InboundService } from '../inbound/inbound.service.ts';
import { messageById, messagesByProviderIds, noteSentStatus } from '../messages/messages.repository.ts';
import { parseRef } from '../messages/messages.rules.ts';
import type { MessagesService } from '../messages/messages.service.ts';
import type { SurveyCalls } from '../surveys/survey-calls.ts';
import { accountById } from './channel-accounts.repository.ts';

const Params = Type.Object({
  provider: Type.String({ maxLength: 20 }),
  account: Type.String({ maxLength: 40, description: '`cha_<n>`' }),
  token: Type.String({ maxLength: 100 }),
  kind: Type.String({ maxLength: 20, description: 'delivery, call_status, greeting, webhook or inbound.' }),
});

const DeploymentParams = Type.Object({
  provider: Type.String({ maxLength: 20 }),
  kind: Type.String({ maxLength: 20, description: 'status or inbound.' }),
});

/**
 * A body as this plugin's parsers give it: its raw text (signatures are over it) and how to read it (JSON, form
 * fields, or nothing). JSON is read only when the adapter asks for it: after the signature was checked, where the
 * provider signs the raw body, so an outsider's body costs no parse.
 */
interface Parsed {
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

/** The most messages and reports one callback body may carry (more is 413). */
export const MAX_CALLBACK_ITEMS = 1000;
/** A callback body is applied in slices of at most this much time, each followed by a turn for other requests. */
const SLICE_MS = 20;
/**
 * Large bodies read and applied at once, in all and per workspace: a tenant chooses how many bodies it sends at
 * once (80 bodies of 500 messages held every other workspace's reads), so its bodies take turns, one at a time, and wait up to
 * CALLBACK_WAIT_MS for it (then 503 with Retry-After: providers send a report again on a 5xx).
 */
const CALLBACKS_AT_ONCE = 4;
const CALLBACKS_PER_WORKSPACE = 1;
const CALLBACK_WAIT_MS = 30_000;
/** A body at least this long (a batch of reports) takes its workspace's turn; a shorter one goes at once. */
const HEAVY_BODY = 8 * 1024;

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

/**
 * The callbacks of providers, dispatched to each provider's adapter (`callback`), with no branch per provider:
 * - a channel account's URLs, `/api/providers/<provider>/cha_<n>/<token>/<kind>`, as its `callback_urls` lists
 *   them: the token (a secret per account) is checked in constant time, then the adapter checks the provider's
 *   signature where it signs. A wrong token or signature is 401 and changes nothing.
 * - the deployment's, `/api/providers/<provider>/<kind>`, for a deployment provider a channel uses (its
 *   `deployment.callbacks`), checked with the deployment's credentials: a wrong signature is 403.
 * Reports go through the message lifecycle's conditional updates, so a repeated or late report never moves a
 * message back; replies join conversations, and STOP works as for any reply.
 */
export const providerCallbackRoutes: FastifyPluginAsyncTypebox<{
  db: Kysely<Database>;
  accounts: AccountProviders;
  messages: MessagesService;
  inbound: InboundService;
  /** IVR surveys' Gather and Passthru requests, and missed calls. */
  surveyCalls: SurveyCalls;
  publicBaseUrl: string | undefined;
  port: number;
  /** The deployment providers in use (config.deployment), whose callbacks are served. */
  deployment: Readonly<Record<string, DeploymentAccount>>;
}> = async (app, deps) => {
  const { db, accounts, messages, inbound } = deps;
  // The channel log of an account's callbacks: the request (body, or query for a GET) and our answer.
  const logged = new WeakMap<
    FastifyRequest,
    { row: ChannelAccountRow; kind: CallbackKind; started: number; at: string }
  >();
  const secretsOf = (row: ChannelAccountRow): string[] => {
    const token = accounts.callbackToken(row) ?? '';
    try {
      return [...Object.values(accounts.credentials(row)), token];
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
            url: `${publicBase(deps)}${request.originalUrl}`,
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
  const turns = new FairGate(CALLBACKS_AT_ONCE, CALLBACKS_PER_WORKSPACE, CALLBACK_WAIT_MS, 'Callback turns');
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

  const invalidUrl = () =>
    new AppError(
      'unauthorized',
      "This callback URL is not valid: copy it again from the account's callback_urls.",
    );

  /** The account the URL names, when its token (and provider and kind) match; 401 otherwise. */
  async function accountOf(params: { provider: string; account: string; token: string; kind: string }) {
    const id = parseRef('cha', params.account);
    const row = id === undefined ? undefined : await accountById(db, id);
    const adapter = row ? adapterOf(row.provider) : undefined;
    // Undefined when the token was sealed under another APP_KEY: no URL of the account is valid then.
    const token = row ? accounts.callbackToken(row) : undefined;
    if (
      !row ||
      !adapter ||
      row.provider !== params.provider ||
      !(adapter.callbacks as readonly string[]).includes(params.kind) ||
      token === undefined ||
      !sameText(token, params.token)
    )
      throw invalidUrl();
    return { row, adapter, kind: params.kind as CallbackKind };
  }

  /** The deployment provider the URL names, where a channel uses it and it has that callback; 404 otherwise. */
  function deploymentOf(params: { provider: string; kind: string }) {
    const adapter = adapterOf(params.provider);
    const own = adapter ? deps.deployment[adapter.name] : undefined;
    if (
      !adapter ||
      !own ||
      !(adapter.deployment?.callbacks as readonly string[] | undefined)?.includes(params.kind)
    )
      throw new AppError(
        'not_found',
        `No callback of the deployment is at /api/providers/${params.provider}/${params.kind}.`,
      );
    return { adapter, own, kind: params.kind as CallbackKind };
  }

  /** The adapter's reading of the request; its refusal is 401 (an account's URL) or 403 (the deployment's). */
  async function read(
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

  /** Applies outcomes to the messages they name (an account's own, or the deployment's), a slice at a time. */
  async function apply(
    accountId: number | null,
    found: Array<{ message: MessageRow | undefined; outcome: ReportOutcome | undefined }>,
  ) {
    let applied = 0;
    await inSlices(found, 50, async (slice) => void (applied += await applySlice(accountId, slice)));
    return applied;
  }

  async function applySlice(
    accountId: number | null,
    found: Array<{ message: MessageRow | undefined; outcome: ReportOutcome | undefined }>,
  ) {
    let applied = 0;
    const notes: Array<{ id: number; error: string }> = [];
    const reports = [];
    for (const { message, outcome } of found) {
      if (!message || !outcome || message.channel_account_id !== accountId) continue;
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

  /** The messages reports name: by our id, or by the provider's id (and number, where one id is many). */
  async function messagesOf(accountId: number | null, reports: CallbackReport[]) {
    const ids = reports.map((r) => r.providerMessageId).filter((id): id is string => !!id);
    const byProvider =
      ids.length === 0 || accountId === null ? [] : await messagesByProviderIds(db, accountId, ids);
    const keyed = new Map(byProvider.map((m) => [`${m.provider_message_id}|${m.to}`, m]));
    const single = new Map(byProvider.map((m) => [m.provider_message_id, m]));
    const found: Array<{
      message: MessageRow | undefined;
      outcome: ReportOutcome | undefined;
      optOut: boolean;
    }> = [];
    for (const report of reports) {
      let message: MessageRow | undefined;
      if (report.messageRef !== undefined) {
        const id = parseRef('msg', report.messageRef);
        message = id === undefined ? undefined : await messageById(db, id);
      } else if (report.providerMessageId)
        message =
          report.to === undefined
            ? single.get(report.providerMessageId)
            : keyed.get(`${report.providerMessageId}|${report.to}`);
      found.push({ message, outcome: report.outcome, optOut: report.optOut === true });
    }
    return found;
  }

  /** Applies what the adapter read: reports, opt-outs its provider reported, replies. */
  async function settle(
    result: CallbackResult,
    provider: string,
    workspaceId: number | null,
    accountId: number | null,
    ip: string | null,
  ): Promise<number> {
    const reports = result.reports ?? [];
    const replies = result.replies ?? [];
    tooMany(reports.length + replies.length);
    const found = await messagesOf(accountId, reports);
    let applied = await apply(accountId, found);
    // The recipient told the provider to stop (STOP to its number): an opt-out in the message's workspace.
    for (const { message, optOut } of found)
      if (optOut && message && message.channel_account_id === accountId)
        await optOutByProvider(db, message.id);
    await inSlices(replies, 1, async ([reply]) => {
      const input = {
        channel: reply!.channel,
        from: reply!.from,
        body: reply!.body.slice(0, 5000),
        providerMessageId: reply!.id.slice(0, 128) || undefined,
      };
      if (workspaceId === null) applied += await inbound.receiveFromProvider(input, provider, ip);
      else if (
        await inbound.receiveForAccount(workspaceId, { ...input, channelAccountId: accountId! }, provider, ip)
      )
        applied += 1;
    });
    return applied;
  }

  /** The adapter's own answer where it gives one (a challenge, empty TwiML), else `{ applied }`. */
  async function answer(reply: FastifyReply, result: CallbackResult, applied: number) {
    if (result.answer) return reply.type(result.answer.type).send(result.answer.body);
    return reply.send({ success: true as const, data: { applied } });
  }

  /** An IVR call's text (`speak`): the message of this account with that id and call. */
  async function speak(
    reply: FastifyReply,
    row: ChannelAccountRow,
    ask: NonNullable<CallbackResult['speak']>,
  ) {
    const id = parseRef('msg', ask.messageRef);
    const message = id === undefined ? undefined : await messageById(db, id);
    const known =
      message &&
      message.channel_account_id === row.id &&
      message.channel === 'ivr' &&
      (message.provider_message_id === null || message.provider_message_id === ask.callId);
    if (!known) throw new AppError('not_found', 'No call of this account has that CallSid and CustomField.');
    return reply.type('text/plain').send(message.body);
  }

  /**
   * An IVR survey's step. The Gather is answered with the provider's JSON (what to say, how many keys to take); the
   * Passthru with 200 while questions remain (the flow goes back to the Gather) or 302 once the survey is done
   * (the flow goes on to its goodbye); a missed call with 200 whether or not a survey started.
   */
  async function survey(
    reply: FastifyReply,
    row: ChannelAccountRow,
    step: NonNullable<CallbackResult['survey']>,
  ) {
    if (step.step === 'gather')
      return reply
        .type('application/json')
        .send(await deps.surveyCalls.gather(row, step.messageRef, step.callId));
    if (step.step === 'answer') {
      const more = await deps.surveyCalls.answer(row, step.messageRef, step.callId, step.digits);
      return reply
        .code(more ? 200 : 302)
        .type('text/plain')
        .send(more ? 'next' : 'done');
    }
    const started = await deps.surveyCalls.missedCall(row, step.from);
    return reply.type('text/plain').send(started ? 'started' : 'ignored');
  }

  /**
   * Runs `work` in the workspace's turn when the body is large (read, parsed and applied one at a time per
   * workspace); a small body (a single report, an IVR step with a caller waiting) goes at once.
   */
  async function inTurn<T>(request: FastifyRequest, key: number, work: () => Promise<T>): Promise<T> {
    const raw = (request.body as Parsed | undefined)?.raw ?? '';
    if (raw.length < HEAVY_BODY) return work();
    const release = await turns.acquire(key);
    try {
      return await work();
    } finally {
      release();
    }
  }

  const accountRoute = async (request: FastifyRequest, reply: FastifyReply) => {
    const { row, adapter, kind } = await accountOf(request.params as Parameters<typeof accountOf>[0]);
    // Logged once the answer is sent (onSend below): only a call whose URL token was right.
    logged.set(request, { row, kind, started: performance.now(), at: nowIso() });
    return inTurn(request, row.workspace_id, () => accountCall(request, reply, row, adapter, kind));
  };

  const accountCall = async (
    request: FastifyRequest,
    reply: FastifyReply,
    row: ChannelAccountRow,
    adapter: ProviderAdapter,
    kind: CallbackKind,
  ) => {
    const result = await read(
      adapter,
      kind,
      request,
      {
        credentials: accounts.credentials(row),
        verifyToken: accounts.verifyToken(row),
        base: publicBase(deps),
      },
      'unauthorized',
    );
    if (result.speak) return speak(reply, row, result.speak);
    if (result.survey) return survey(reply, row, result.survey);
    const applied = await settle(result, row.provider, row.workspace_id, row.id, request.ip ?? null);
    return answer(reply, result, applied);
  };

  const deploymentRoute = async (request: FastifyRequest, reply: FastifyReply) => {
    const { adapter, own, kind } = deploymentOf(request.params as { provider: string; kind: string });
    // The deployment's own callbacks (signed by its provider) take turns under key 0.
    return inTurn(request, 0, async () => {
      const result = await read(
        adapter,
        kind,
        request,
        {
          credentials: own.credentials,
          verifyToken: undefined,
          base: deps.publicBaseUrl ?? `${request.protocol}://${request.host}`,
        },
        'forbidden',
      );
      const applied = await settle(result, adapter.name, null, null, request.ip ?? null);
      return answer(reply, result, applied);
    });
  };

  const common = { tags: ['Provider callbacks'], security: [] };
  const config = { permission: 'public' as const, rateLimit: 'callback' as const };
  const Applied = Success(
    Type.Object({ applied: Type.Integer({ description: 'Reports and messages taken from the request.' }) }),
  );
  const Text = {
    description:
      "Text (a challenge, an IVR greeting, empty TwiML or an empty reply), or an IVR survey's question in the JSON the provider's Gather applet reads.",
    content: {
      'text/plain': { schema: { type: 'string' } },
      'text/xml': { schema: { type: 'string' } },
      'application/json': { schema: { type: 'object', additionalProperties: true } },
    },
  };
  const Query = Type.Object(
    {
      message: Type.Optional(
        Type.String({
          maxLength: 40,
          description: 'Our message id, where a provider is given it in the URL.',
        }),
      ),
      'hub.mode': Type.Optional(Type.String({ maxLength: 40 })),
      'hub.verify_token': Type.Optional(Type.String({ maxLength: 200 })),
      'hub.challenge': Type.Optional(Type.String({ maxLength: 200 })),
      CallSid: Type.Optional(Type.String({ maxLength: 100 })),
      CustomField: Type.Optional(Type.String({ maxLength: 100 })),
      From: Type.Optional(Type.String({ maxLength: 40 })),
      CallFrom: Type.Optional(Type.String({ maxLength: 40 })),
      digits: Type.Optional(Type.String({ maxLength: 40, description: 'Keys pressed at a Gather ("2").' })),
      Body: Type.Optional(Type.String({ maxLength: 5000 })),
    },
    {
      additionalProperties: true,
      description: 'Other fields the provider adds are ignored.',
    },
  );

  app.get('/providers/:provider/:account/:token/:kind', {
    config,
    schema: {
      ...common,
      params: Params,
      querystring: Query,
      summary:
        "A channel account's GET callbacks: a WhatsApp webhook's verification, an IVR call's text, forwarded SMS replies",
      description:
        'See docs/providers.md for what each provider sends. `webhook`: a verification (`hub.mode=subscribe`, ' +
        "`hub.verify_token`: the account's `verify_token`, `hub.challenge`) answers the challenge as text/plain. " +
        '`greeting`: an IVR call asks for its text (`CallSid`, `CustomField`: our message id), answered as text/plain, ' +
        "404 for an unknown call. `survey_gather` and `survey_answer`: an IVR survey's Gather and Passthru steps, " +
        "each with the call's own `CallSid` (403 without it, 404 when it is not the call's); a Passthru answers only " +
        'the question its Gather asked, once. `inbound`: an SMS reply forwarded by GET, answered with an empty text/plain (no ' +
        'automatic reply). Kinds by provider: ' +
        adapters
          .filter((a) => a.callbacks.length > 0)
          .map((a) => `${a.name} (${a.callbacks.join(', ')})`)
          .join(', ') +
        '.',
      produces: ['text/plain'],
      response: { 200: Text },
    },
    handler: accountRoute,
  });

  app.post('/providers/:provider/:account/:token/:kind', {
    config,
    schema: {
      ...common,
      params: Params,
      querystring: Query,
      summary: "A channel account's delivery reports and inbound messages",
      description:
        'Each provider in its own documented format (docs/providers.md): delivery reports and call statuses (form or ' +
        "JSON), signed webhooks (checked with the account's credentials), forwarded SMS replies. One body carries at " +
        'most 1,000 messages and reports (more is 413, and nothing is applied).',
      response: { 200: Applied },
    },
    handler: accountRoute,
  });

  if (Object.keys(deps.deployment).some((name) => adapterOf(name)?.deployment?.callbacks.length)) {
    const description =
      "The callbacks of the deployment's provider of a channel (SMS_PROVIDER and the like), signed with its " +
      'credentials: `status` (delivery reports: our message id in `?message=`) and `inbound` (replies to the shared ' +
      'number: they belong to the workspace that last sent to the sender; STOP opts the sender out everywhere). A ' +
      'signature that does not match is 403 and changes nothing.';
    app.get('/providers/:provider/:kind', {
      config,
      schema: {
        ...common,
        params: DeploymentParams,
        querystring: Query,
        summary: "The deployment provider's GET callbacks",
        description,
        response: { 200: Text },
      },
      handler: deploymentRoute,
    });
    app.post('/providers/:provider/:kind', {
      config,
      schema: {
        ...common,
        params: DeploymentParams,
        querystring: Query,
        summary: "The deployment provider's delivery reports and replies",
        description,
        produces: ['application/json', 'text/xml'],
        response: { 200: Applied },
      },
      handler: deploymentRoute,
    });
  }
};
