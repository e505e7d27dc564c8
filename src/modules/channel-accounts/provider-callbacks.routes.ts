import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';

/** The app the routes are registered on. */
type CallbackApp = Parameters<FastifyPluginAsyncTypebox>[0];
import type { Kysely } from 'kysely';
import type { DeploymentAccount } from '../../config.ts';
import type { ChannelAccountRow, Database } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import { sameText } from '../../lib/crypto.ts';
import { FairGate } from '../../lib/fair-gate.ts';
import { type AccountProviders, publicBase } from '../sending/accounts.ts';
import type { CallbackKind, ProviderAdapter } from '../../providers/adapter.ts';
import { adapterOf, adapters } from '../../providers/registry.ts';
import type { ProviderCallbacks } from '../sending/callbacks.ts';
import { accountById } from './channel-accounts.repository.ts';
import {
  installCallbackParsers,
  invalidUrl,
  logCallbacks,
  type Parsed,
  readCallback,
  sendAnswer,
} from './provider-callbacks.http.ts';
import {
  Applied,
  common,
  config,
  DeploymentParams,
  Params,
  Query,
  SurveyOver,
  Text,
} from './provider-callbacks.schemas.ts';
import { parseRef } from '../../refs.ts';

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

/** A channel account's callback URL: `/api/providers/<provider>/cha_<n>/<token>/<kind>`. */
interface AccountParams {
  provider: string;
  account: string;
  token: string;
  kind: string;
}

/** What the callback routes are built from. */
interface CallbackRouteDeps {
  db: Kysely<Database>;
  accounts: AccountProviders;
  /** Applies what the adapter read: reports, replies, a call's steps. */
  callbacks: ProviderCallbacks;
  publicBaseUrl: string | undefined;
  port: number;
  /** The deployment providers in use (config.deployment), whose callbacks are served. */
  deployment: Readonly<Record<string, DeploymentAccount>>;
}

/** The handlers of the callback routes: find the account or the deployment provider, ask its adapter, answer. */
class CallbackHandlers {
  private readonly turns = new FairGate(
    CALLBACKS_AT_ONCE,
    CALLBACKS_PER_WORKSPACE,
    CALLBACK_WAIT_MS,
    'Callback turns',
  );

  constructor(
    private readonly deps: CallbackRouteDeps,
    private readonly log: ReturnType<typeof logCallbacks>,
  ) {}

  /** The account the URL names, when its token (and provider and kind) match; 401 otherwise. */
  private async accountOf(params: AccountParams) {
    const id = parseRef('cha', params.account);
    const row = id === undefined ? undefined : await accountById(this.deps.db, id);
    const adapter = row ? adapterOf(row.provider) : undefined;
    // Undefined when the token was sealed under another APP_KEY: no URL of the account is valid then.
    const token = row ? this.deps.accounts.callbackToken(row) : undefined;
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
  private deploymentOf(params: { provider: string; kind: string }) {
    const adapter = adapterOf(params.provider);
    const own = adapter ? this.deps.deployment[adapter.name] : undefined;
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

  /**
   * Runs `work` in the workspace's turn when the body is large (read, parsed and applied one at a time per
   * workspace); a small body (a single report, an IVR step with a caller waiting) goes at once.
   */
  private async inTurn<T>(request: FastifyRequest, key: number, work: () => Promise<T>): Promise<T> {
    const raw = (request.body as Parsed | undefined)?.raw ?? '';
    if (raw.length < HEAVY_BODY) return work();
    const release = await this.turns.acquire(key);
    try {
      return await work();
    } finally {
      release();
    }
  }

  async account(request: FastifyRequest, reply: FastifyReply) {
    const { row, adapter, kind } = await this.accountOf(request.params as AccountParams);
    // Logged once the answer is sent (logCallbacks' onSend): only a call whose URL token was right.
    this.log.note(request, row, kind);
    return this.inTurn(request, row.workspace_id, () => this.accountCall(request, reply, row, adapter, kind));
  }

  private async accountCall(
    request: FastifyRequest,
    reply: FastifyReply,
    row: ChannelAccountRow,
    adapter: ProviderAdapter,
    kind: CallbackKind,
  ) {
    const result = await readCallback(
      adapter,
      kind,
      request,
      {
        credentials: this.deps.accounts.credentials(row),
        verifyToken: this.deps.accounts.verifyToken(row),
        base: publicBase(this.deps),
      },
      'unauthorized',
    );
    if (result.speak || result.survey) {
      // A call's step: the service says what, the adapter says it in its provider's format.
      if (!adapter.answerCall) throw invalidUrl();
      return sendAnswer(reply, adapter.answerCall(await this.deps.callbacks.call(row, result)));
    }
    const applied = await this.deps.callbacks.settle(result, {
      provider: row.provider,
      workspaceId: row.workspace_id,
      accountId: row.id,
      ip: request.ip ?? null,
    });
    return sendAnswer(reply, result.answer, applied);
  }

  async deployment(request: FastifyRequest, reply: FastifyReply) {
    const { adapter, own, kind } = this.deploymentOf(request.params as { provider: string; kind: string });
    // The deployment's own callbacks (signed by its provider) take turns under key 0.
    return this.inTurn(request, 0, async () => {
      const result = await readCallback(
        adapter,
        kind,
        request,
        {
          credentials: own.credentials,
          verifyToken: undefined,
          base: this.deps.publicBaseUrl ?? `${request.protocol}://${request.host}`,
        },
        'forbidden',
      );
      const applied = await this.deps.callbacks.settle(result, {
        provider: adapter.name,
        workspaceId: null,
        accountId: null,
        ip: request.ip ?? null,
      });
      return sendAnswer(reply, result.answer, applied);
    });
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
export const providerCallbackRoutes: FastifyPluginAsyncTypebox<CallbackRouteDeps> = async (app, deps) => {
  const log = logCallbacks(app, { db: deps.db, accounts: deps.accounts, base: publicBase(deps) });
  await installCallbackParsers(app);
  const handlers = new CallbackHandlers(deps, log);
  accountCallbackRoutes(app, handlers);
  deploymentCallbackRoutes(app, handlers, deps);
};

/** A channel account's callbacks. */
function accountCallbackRoutes(app: CallbackApp, handlers: CallbackHandlers): void {
  app.get('/providers/:provider/:account/:token/:kind', {
    config,
    schema: {
      ...common,
      params: Params,
      querystring: Query,
      summary:
        "A channel account's GET callbacks: a WhatsApp webhook's verification, an IVR call's text, forwarded SMS replies",
      description:
        'See docs/providers.md for what each provider sends, in its own fields. `webhook`: a verification with ' +
        "the account's `verify_token` answers the provider's challenge as text/plain. " +
        '`greeting`: an IVR call asks for its text (the call id and our message id), answered as text/plain, ' +
        "404 for an unknown call. `survey_gather` and `survey_answer`: an IVR survey's question and answer steps, " +
        "each with the call's own id (403 without it, 404 when it is not the call's); an answer step answers only " +
        'the question just asked, once. `inbound`: an SMS reply forwarded by GET, answered with an empty text/plain (no ' +
        'automatic reply). Kinds by provider: ' +
        adapters
          .filter((a) => a.callbacks.length > 0)
          .map((a) => `${a.name} (${a.callbacks.join(', ')})`)
          .join(', ') +
        '.',
      produces: ['text/plain'],
      response: { 200: Text, 302: SurveyOver },
    },
    handler: (request, reply) => handlers.account(request, reply),
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
    handler: (request, reply) => handlers.account(request, reply),
  });
}

/** The deployment provider's callbacks, where a channel uses one that has them. */
function deploymentCallbackRoutes(
  app: CallbackApp,
  handlers: CallbackHandlers,
  deps: CallbackRouteDeps,
): void {
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
      handler: (request, reply) => handlers.deployment(request, reply),
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
      handler: (request, reply) => handlers.deployment(request, reply),
    });
  }
}
