import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
  LogController,
} from 'fastify';
import { Redis } from 'ioredis';
import pino from 'pino';
import type { Config } from './config.ts';
import type { Db } from './db/connect.ts';
import { DatabaseOutage } from './db/outage.ts';
import { AppError } from './errors.ts';
import { nestsDeeperThan, tooDeep } from './lib/json.ts';
import {
  clientErrorHandler,
  frameworkErrors,
  installErrorHandling,
  methodNotAllowed,
} from './http/error-handler.ts';
import { installMethodRules, RouteMethods } from './http/methods.ts';
import { installCors } from './http/cors.ts';
import { installGuard } from './http/guard.ts';
import { trackHandlers } from './http/in-flight.ts';
import { installOpenApi } from './http/openapi.ts';
import { webhookEventsOpenApi } from './webhooks.openapi.ts';
import { consoleRoutes } from './http/console.ts';
import { setSecurityHeaders } from './http/security-headers.ts';
import { RateLimits } from './http/rate-limit.ts';
import { closeEmptyBody, closeQueryString, refuseNul, validatorCompilerFor } from './http/validation.ts';
import { installDeprecationHeaders, rewriteVersionedUrl } from './http/versioning.ts';
import { auditRoutes } from './modules/audit/audit.routes.ts';
import { AuditService } from './modules/audit/audit.service.ts';
import { authRoutes } from './modules/auth/auth.routes.ts';
import { AuthService } from './modules/auth/auth.service.ts';
import { authChannel, TokenOwners } from './modules/auth/token-owners.ts';
import { grievancesRoutes } from './modules/grievances/grievances.routes.ts';
import { GrievancesService } from './modules/grievances/grievances.service.ts';
import { healthRoutes } from './modules/health/health.routes.ts';
import { paymentsRoutes } from './modules/payments/payments.routes.ts';
import { PaymentsService } from './modules/payments/payments.service.ts';
import { campaignsRoutes } from './modules/campaigns/campaigns.routes.ts';
import { creditsRoutes } from './modules/credits/credits.routes.ts';
import { CreditsService } from './modules/credits/credits.service.ts';
import { CampaignsService } from './modules/campaigns/campaigns.service.ts';
import { IdempotencyService } from './modules/idempotency/idempotency.service.ts';
import { messagesRoutes } from './modules/messages/messages.routes.ts';
import { MessagesService } from './modules/messages/messages.service.ts';
import { optOutsRoutes } from './modules/opt-outs/opt-outs.routes.ts';
import { OptOutsService } from './modules/opt-outs/opt-outs.service.ts';
import { placesRoutes } from './modules/places/places.routes.ts';
import { PlacesService } from './modules/places/places.service.ts';
import { silencePeriodsRoutes } from './modules/silence-periods/silence-periods.routes.ts';
import { SilencePeriodsService } from './modules/silence-periods/silence-periods.service.ts';
import { inboundRoutes } from './modules/inbound/inbound.routes.ts';
import { InboundService } from './modules/inbound/inbound.service.ts';
import { unsubscribeRoutes } from './modules/opt-outs/unsubscribe.routes.ts';
import { templatesRoutes } from './modules/templates/templates.routes.ts';
import { TemplatesService } from './modules/templates/templates.service.ts';
import { CampaignPreview } from './modules/sending/preview.ts';
import { previewRoutes } from './modules/sending/preview.routes.ts';
import { usersRoutes } from './modules/users/users.routes.ts';
import { messageChannels, type MessageChannel } from './domain.ts';
import { workspacesRoutes } from './modules/workspaces/workspaces.routes.ts';
import { segmentsRoutes } from './modules/segments/segments.routes.ts';
import { SegmentsService } from './modules/segments/segments.service.ts';
import { UsersService } from './modules/users/users.service.ts';
import { buildVoterImports } from './modules/voter-imports/import-jobs.ts';
import { VoterExports } from './modules/voter-exports/voter-exports.ts';
import { voterRecordRoutes } from './modules/voters/voter-record.routes.ts';
import { VoterFieldsService } from './modules/voters/voter-fields.ts';
import { VoterTagging } from './modules/voters/voter-tags.ts';
import { votersRoutes } from './modules/voters/voters.routes.ts';
import { voterImportsRoutes } from './modules/voter-imports/voter-imports.routes.ts';
import { voterExportsRoutes } from './modules/voter-exports/voter-exports.routes.ts';
import { VotersService } from './modules/voters/voters.service.ts';
import { webhooksRoutes } from './modules/webhooks/webhooks.routes.ts';
import { WebhooksService } from './modules/webhooks/webhooks.service.ts';
import { type Resolver, systemResolver } from './modules/webhooks/webhooks.ssrf.ts';
import type { Providers } from './providers/provider.ts';
import { adapterNamed, createProviders } from './providers/registry.ts';
import { AccountPace, AccountProviders, CALLBACK_TOKEN, publicBase } from './modules/sending/accounts.ts';
import { channelAccountsRoutes } from './modules/channel-accounts/channel-accounts.routes.ts';
import {
  ChannelAccountsService,
  channelCarrier,
} from './modules/channel-accounts/channel-accounts.service.ts';
import { providerCallbackRoutes } from './modules/channel-accounts/provider-callbacks.routes.ts';
import { conversationsRoutes } from './modules/conversations/conversations.routes.ts';
import { ConversationsService } from './modules/conversations/conversations.service.ts';
import { quickRepliesRoutes } from './modules/conversations/quick-replies.ts';
import { eventsRoutes } from './modules/events/events.routes.ts';
import { EventHub } from './modules/events/live.ts';
import { SurveyCalls } from './modules/surveys/survey-calls.ts';
import { ProviderCallbacks } from './modules/sending/callbacks.ts';
import { MessageLifecycle } from './modules/sending/lifecycle.ts';
import { SurveyResults } from './modules/surveys/survey-results.ts';
import { surveysRoutes } from './modules/surveys/surveys.routes.ts';
import { SurveysService } from './modules/surveys/surveys.service.ts';
import { SurveyRunsService } from './modules/surveys/survey-runs.service.ts';

export interface AppDeps {
  config: Readonly<Config>;
  db: Db;
  /** Defaults to the providers the config names. Tests pass their own to observe what was sent. */
  providers?: Providers;
  /** Key prefix of the rate-limit counters in Redis; defaults to REDIS_PREFIX + 'rl' (tests pass their own). */
  rateLimitPrefix?: string;
  logger?: FastifyServerOptions['logger'];
  /** The process's logger (bootstrap.ts), used instead of `logger`: one destination for the whole process. */
  loggerInstance?: FastifyBaseLogger;
  /** DNS for the webhook URL checks (SSRF); tests inject their own. */
  webhookResolver?: Resolver;
}

/** The longest path parameter the router accepts (frameworkErrors answers longer ones with 400). */
export const MAX_PATH_PARAM = 2048;

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

const SECRET_PATHS: Array<[RegExp, string]> = [
  // A channel account's callback URL: its token is the only authentication of unsigned providers' callbacks.
  [CALLBACK_TOKEN, '$1:token'],
  // A one-click unsubscribe link: its token carries the address.
  [/(\/unsubscribe\/)[^/]+/, '$1:token'],
];

/**
 * A request's path as logged: without its query, and with every secret or personal segment replaced by
 * `:token` (callback tokens, unsubscribe tokens, and any segment that is an email address or a phone number).
 */
export function loggedPath(url: string): string {
  let path = url.split('?')[0] ?? '';
  for (const [pattern, replacement] of SECRET_PATHS) path = path.replace(pattern, replacement);
  return path
    .split('/')
    .map((segment) => {
      let text = segment;
      try {
        text = decodeURIComponent(segment);
      } catch {
        // not percent-encoded text: judged as it is
      }
      return text.includes('@') || /^\+\d{6,15}$/.test(text) || /^\d{10,15}$/.test(text) ? ':token' : segment;
    })
    .join('/');
}

/** Personal data stays out of the logs: requests are logged by method and path only, without query or headers. */
export function loggerOptions(level: string): FastifyServerOptions['logger'] {
  return {
    level,
    serializers: {
      req: (req: { method: string; url: string; id: string }) => ({
        id: req.id,
        method: req.method,
        path: loggedPath(req.url),
      }),
      res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
      // PostgreSQL errors quote row values in `detail` (e.g. the email of a unique violation): drop them.
      err: (err: Error) => {
        const { detail: _detail, where: _where, ...rest } = pino.stdSerializers.err(err);
        return rest as ReturnType<typeof pino.stdSerializers.err>;
      },
    },
  };
}

/**
 * One log line per request, when it completes (method, path, status, time), instead of Fastify's two: about
 * 10 µs a request less. Errors are logged as Fastify logs them.
 */
class OneLinePerRequest extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    if (error) super.requestCompleted(error, request, reply);
    else reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}

/** Builds the whole application on the given database. Never listens: server.ts and the tests do that. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config, db } = deps;
  const app = Fastify({
    ...(deps.loggerInstance
      ? { loggerInstance: deps.loggerInstance }
      : { logger: deps.logger ?? loggerOptions(config.logLevel) }),
    logController: new OneLinePerRequest(),
    // A hop count trusts that many proxies in front, as proxy-addr does with a number.
    trustProxy:
      typeof config.trustProxy === 'number'
        ? (_address: string, hop: number) => hop < (config.trustProxy as number)
        : config.trustProxy,
    bodyLimit: config.bodyLimitBytes,
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    rewriteUrl: (req) => rewriteVersionedUrl(req.url ?? '/'),
    // A path parameter may be as long as a one-click unsubscribe token of a 254-character address (ids are
    // bounded by their schemas); the router's default of 100 refused those links before the route ran.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PATH_PARAM },
    clientErrorHandler,
    frameworkErrors,
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.setValidatorCompiler(validatorCompilerFor(config.defaultCountry));
  const methods = new RouteMethods();
  app.addHook('onRoute', methods.record);
  app.addHook('onRoute', closeQueryString);
  app.addHook('onRoute', closeEmptyBody);
  trackHandlers(app);

  // JSON only. An empty body is "no body" (logout with a stray Content-Type), and the default parser keeps
  // guarding against prototype poisoning.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    if (nestsDeeperThan(text)) return done(new AppError('bad_request', tooDeep), undefined);
    void parseJson(request, text, done);
  });

  // Hooks every request runs are plain callbacks, one per stage: an async hook costs a promise per request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    setSecurityHeaders(request, reply);
    done();
  });
  installMethodRules(
    app,
    methods,
    (request, reply, allowed) => void methodNotAllowed(request, reply, allowed),
  );
  await installCors(app, config.corsOrigins);
  app.decorate('shuttingDown', false);
  app.decorate('databaseOutage', new DatabaseOutage(db, app.log));
  // A NUL character anywhere in the path, query or JSON body is a 422 naming the field.
  // Path and query can hold one only percent-encoded, so a request without "%00" and without a body is clear.
  app.addHook('preValidation', (request, _reply, done) => {
    if (request.body === undefined && !request.url.includes('%00')) return done();
    try {
      refuseNul([request.params, ''], [request.query, ''], [request.body, '']);
      done();
    } catch (error) {
      done(error as Error);
    }
  });

  const redis = config.redisUrl
    ? new Redis(config.redisUrl, {
        enableOfflineQueue: false,
        maxRetriesPerRequest: 1,
        lazyConnect: false,
        commandTimeout: config.redisTimeoutMs,
        connectTimeout: Math.max(1000, config.redisTimeoutMs),
      })
    : undefined;
  // RateLimits logs once when Redis stops answering and once when it is back; each reconnection error would
  // otherwise be a line (and an unhandled 'error' event without a listener).
  redis?.on('error', (error) => app.log.debug({ err: error }, 'redis error'));
  const rateLimits = new RateLimits(
    config,
    redis,
    deps.rateLimitPrefix ?? `${config.redisPrefix}rl`,
    app.log,
  );

  const providers = deps.providers ?? createProviders(config, app.log);
  const tokenOwners = new TokenOwners(db, redis, authChannel(config.redisPrefix), app.log);
  const users = new UsersService({ db: db.kysely, config, authChanges: tokenOwners });
  const voters = new VotersService({ db: db.kysely, defaultCountry: config.defaultCountry });
  const grievances = new GrievancesService({ db: db.kysely, defaultCountry: config.defaultCountry });
  const payments = new PaymentsService({ db: db.kysely });
  // The deployment's provider of each channel, by name: what carries a channel with no account of the workspace.
  const deploymentNames = Object.fromEntries(messageChannels.map((c) => [c, providers[c].name])) as Record<
    MessageChannel,
    string
  >;
  const webhooks = new WebhooksService({
    db: db.kysely,
    appKey: config.appKey,
    settings: config.webhooks,
    resolver: deps.webhookResolver ?? systemResolver,
  });
  // Created here (before the routes that use it) so that sign-in codes can go through a workspace's own gateway.
  const accountProviders = new AccountProviders({ config, log: app.log });
  const auth = new AuthService({
    db: db.kysely,
    config,
    users,
    sms: providers.sms,
    otpRoute: async (workspaceId) => {
      const { account } = await channelCarrier(db.kysely, workspaceId, 'sms');
      if (!account || !accountProviders.readable(account)) return undefined;
      const adapter = adapterNamed(account.provider);
      const setting = adapter.otpTemplateSetting;
      const settings = JSON.parse(account.settings) as Record<string, unknown>;
      const templateId = setting ? settings[setting] : undefined;
      // A gateway that sends templates only, without an OTP template: the deployment's provider carries the code.
      if (adapter.templates?.sends === 'only' && typeof templateId !== 'string') return undefined;
      return {
        provider: accountProviders.providerFor(account, 'sms'),
        ...(typeof templateId === 'string' ? { templateIds: { [adapter.name]: templateId } } : {}),
      };
    },
    log: app.log,
    tokenOwners,
  });

  installErrorHandling(app, methods);
  installDeprecationHeaders(app, config.apiDeprecation);
  installGuard(app, { rateLimits, authenticate: (header) => auth.authenticate(header) });
  await installOpenApi(app, webhookEventsOpenApi);

  await app.register(consoleRoutes, { dir: fileURLToPath(new URL('../dist/console', import.meta.url)) });
  await app.register(healthRoutes, { prefix: '/api', db, redis, redisTimeoutMs: config.redisTimeoutMs });
  await app.register(authRoutes, { prefix: '/api', auth, rateLimits, defaultCountry: config.defaultCountry });
  await app.register(usersRoutes, { prefix: '/api', users });
  await app.register(workspacesRoutes, {
    prefix: '/api',
    db: db.kysely,
    deployment: deploymentNames,
    defaultTimeZone: config.defaultTimeZone,
    dltEnforce: config.dltEnforce,
  });
  await app.register(auditRoutes, { prefix: '/api', audit: new AuditService({ db: db.kysely }) });
  const { importer, jobs } = buildVoterImports({ db, config, log: app.log });
  await app.register(voterImportsRoutes, {
    prefix: '/api',
    importer,
    jobs,
    maxImportBytes: config.import.maxBytes,
    idleTimeoutMs: config.export.idleTimeoutMs,
  });
  await app.register(voterExportsRoutes, {
    prefix: '/api',
    exports: new VoterExports({ db, settings: config.export }),
    idleTimeoutMs: config.export.idleTimeoutMs,
  });
  await app.register(votersRoutes, { prefix: '/api', voters });
  await app.register(voterRecordRoutes, {
    prefix: '/api',
    fields: new VoterFieldsService({ db: db.kysely }),
    tagging: new VoterTagging({ db: db.kysely }),
  });
  await app.register(segmentsRoutes, { prefix: '/api', segments: new SegmentsService({ db: db.kysely }) });
  await app.register(grievancesRoutes, { prefix: '/api', grievances });
  const idempotency = new IdempotencyService({ db: db.kysely });
  await app.register(paymentsRoutes, { prefix: '/api', payments, idempotency });
  await app.register(webhooksRoutes, { prefix: '/api', webhooks });

  const messages = new MessagesService({
    db: db.kysely,
    config,
    providers,
    log: app.log,
    accounts: accountProviders,
    pace: new AccountPace({ redis, prefix: config.redisPrefix }),
  });
  const campaigns = new CampaignsService({
    db: db.kysely,
    config,
    log: app.log,
    deployment: deploymentNames,
  });
  await app.register(messagesRoutes, { prefix: '/api', messages, campaigns, idempotency });
  await app.register(campaignsRoutes, { prefix: '/api', campaigns, idempotency });
  await app.register(creditsRoutes, { prefix: '/api', credits: new CreditsService({ db: db.kysely }) });
  const optOuts = new OptOutsService({ db: db.kysely, defaultCountry: config.defaultCountry });
  await app.register(optOutsRoutes, { prefix: '/api', optOuts, idleTimeoutMs: config.export.idleTimeoutMs });
  await app.register(unsubscribeRoutes, { prefix: '/api', db: db.kysely, appKey: config.appKey });
  const silencePeriods = new SilencePeriodsService({ db: db.kysely });
  await app.register(silencePeriodsRoutes, { prefix: '/api', silencePeriods });
  await app.register(placesRoutes, { prefix: '/api', places: new PlacesService({ db: db.kysely }) });
  await app.register(previewRoutes, {
    prefix: '/api',
    preview: new CampaignPreview({ db: db.kysely, quietHours: config.quietHours }),
  });
  await app.register(templatesRoutes, { prefix: '/api', templates: new TemplatesService({ db: db.kysely }) });
  const inbound = new InboundService({ db: db.kysely, defaultCountry: config.defaultCountry });
  await app.register(inboundRoutes, { prefix: '/api', inbound });
  await app.register(channelAccountsRoutes, {
    prefix: '/api',
    accounts: new ChannelAccountsService({
      db: db.kysely,
      appKey: config.appKey,
      publicBaseUrl: publicBase(config),
      dltEnforce: config.dltEnforce,
    }),
    messages,
  });
  await app.register(conversationsRoutes, {
    prefix: '/api',
    conversations: new ConversationsService({
      db: db.kysely,
      messages,
      grievances,
      deployment: deploymentNames,
      dltEnforce: config.dltEnforce,
    }),
  });
  await app.register(quickRepliesRoutes, { prefix: '/api', db: db.kysely });
  // Started now, not at the first stream: it prunes live_events whether or not any stream or worker runs.
  const hub = new EventHub(db.kysely, config.databaseUrl);
  hub.start();
  await app.register(eventsRoutes, {
    prefix: '/api',
    hub,
    authenticate: (header) => auth.authenticate(header),
    perUser: config.eventStreamsPerUser,
    bufferBytes: config.eventStreamBufferBytes,
  });
  const surveys = new SurveysService({ db: db.kysely });
  await app.register(surveysRoutes, {
    prefix: '/api',
    surveys,
    runs: new SurveyRunsService({ db: db.kysely, config, surveys }),
    results: new SurveyResults({ db: db.kysely, surveys }),
    idleTimeoutMs: config.export.idleTimeoutMs,
  });
  await app.register(providerCallbackRoutes, {
    prefix: '/api',
    db: db.kysely,
    accounts: accountProviders,
    callbacks: new ProviderCallbacks({
      db: db.kysely,
      lifecycle: new MessageLifecycle(db.kysely),
      inbound,
      surveyCalls: new SurveyCalls({ db: db.kysely, defaultCountry: config.defaultCountry }),
    }),
    publicBaseUrl: config.publicBaseUrl,
    port: config.port,
    deployment: config.deployment,
  });

  app.addHook('onClose', async () => {
    app.databaseOutage.close();
    await auth.settled();
    tokenOwners.close();
    redis?.disconnect();
    accountProviders.close();
  });
  return app;
}
