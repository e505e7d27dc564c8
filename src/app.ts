import { randomUUID } from 'node:crypto';
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
import { installEarlyMethodRefusal, installMethodRules, RouteMethods } from './http/methods.ts';
import { installCors } from './http/cors.ts';
import { installGuard } from './http/guard.ts';
import { trackHandlers } from './http/in-flight.ts';
import { installOpenApi } from './http/openapi.ts';
import { webhookEventsOpenApi } from './webhooks.openapi.ts';
import { setSecurityHeaders } from './http/security-headers.ts';
import { RateLimits } from './http/rate-limit.ts';
import { closeEmptyBody, closeQueryString, refuseNul, validatorCompilerFor } from './http/validation.ts';
import { installDeprecationHeaders, rewriteVersionedUrl } from './http/versioning.ts';
import { AuthService } from './modules/auth/auth.service.ts';
import { authChannel, TokenOwners } from './modules/auth/token-owners.ts';
import { GrievancesService } from './modules/grievances/grievances.service.ts';
import { PaymentsService } from './modules/payments/payments.service.ts';
import { messageChannels, type MessageChannel } from './domain.ts';
import { UsersService } from './modules/users/users.service.ts';
import { VotersService } from './modules/voters/voters.service.ts';
import { WebhooksService } from './modules/webhooks/webhooks.service.ts';
import { type Resolver, systemResolver } from './modules/webhooks/webhooks.ssrf.ts';
import type { MessageProvider, Providers } from './providers/provider.ts';
import { adapterNamed, createProviders } from './providers/registry.ts';
import { AccountProviders, CALLBACK_TOKEN } from './modules/sending/accounts.ts';
import { channelCarrier } from './modules/channel-accounts/channel-accounts.service.ts';
import type { CodeSender } from './modules/privacy/public-requests.ts';
import {
  registerInboxRoutes,
  registerMessagingRoutes,
  registerPeopleRoutes,
  registerPrivacyRoutes,
} from './app.routes.ts';

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
  const app = createFastify(deps);
  const methods = await installRequestRules(app, deps);
  const redis = connectRedis(config, app.log);
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
  const auth = buildAuth(deps, app.log, { users, sms: providers.sms, accountProviders, tokenOwners });
  installErrorHandling(app, methods);
  installDeprecationHeaders(app, config.apiDeprecation);
  installGuard(app, { rateLimits, authenticate: (header) => auth.authenticate(header) });
  installEarlyMethodRefusal(
    app,
    methods,
    (request, reply, allowed) => void methodNotAllowed(request, reply, allowed),
  );
  await installOpenApi(app, webhookEventsOpenApi);

  const shared = { redis, rateLimits, auth, users, voters, grievances, payments, webhooks, deploymentNames };
  const idempotency = await registerPeopleRoutes(app, deps, shared);
  const { messages, inbound } = await registerMessagingRoutes(app, deps, {
    ...shared,
    providers,
    accountProviders,
    idempotency,
  });
  await registerInboxRoutes(app, deps, { ...shared, accountProviders, messages, inbound });
  const privacyCodes = await registerPrivacyRoutes(app, deps, {
    rateLimits,
    sendCode: codeSender(db, providers, accountProviders),
  });
  app.addHook('onClose', async () => {
    app.databaseOutage.close();
    await auth.settled();
    await privacyCodes.settled();
    tokenOwners.close();
    redis?.disconnect();
    accountProviders.close();
  });
  return app;
}

/** The Fastify instance with the service's options: logging, proxies, body limit, request ids, the router. */
function createFastify(deps: AppDeps) {
  const { config } = deps;
  return Fastify({
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
}

type App = ReturnType<typeof createFastify>;

/**
 * What every request goes through before its route: validation, the JSON parser, request ids and security
 * headers, 405s before the body is read, CORS, and the NUL refusal. Returns the route table of methods.
 */
async function installRequestRules(app: App, deps: AppDeps): Promise<RouteMethods> {
  const { config, db } = deps;
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

  return methods;
}

/** The Redis client where REDIS_URL is set: commands fail fast rather than queue while it is away. */
function connectRedis(config: Config, log: FastifyBaseLogger): Redis | undefined {
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
  redis?.on('error', (error) => log.debug({ err: error }, 'redis error'));
  return redis;
}

/**
 * How a workspace's one-time codes (sign-in, the privacy page's) go by SMS: through its own gateway where it has
 * one that can carry them (a DLT OTP template where it sends templates only), else the deployment's provider.
 */
export function smsCodeRoute(db: Db, accountProviders: AccountProviders) {
  return async (workspaceId: number) => {
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
  };
}

/**
 * The privacy page's codes: by SMS to a phone (as sign-in codes go, a DLT OTP template's `##otp##` and
 * `##minutes##` where the gateway sends templates only), by email to an email (the workspace's email account,
 * else the deployment's).
 */
function codeSender(db: Db, providers: Providers, accountProviders: AccountProviders): CodeSender {
  const smsRoute = smsCodeRoute(db, accountProviders);
  return async (workspaceId, address, code, minutes) => {
    const body = `${code} is your code to confirm your privacy request. It expires in ${minutes} minutes. Do not share it.`;
    if (address.includes('@')) {
      const { account } = await channelCarrier(db.kysely, workspaceId, 'email');
      const provider =
        account && accountProviders.readable(account)
          ? accountProviders.providerFor(account, 'email')
          : providers.email;
      await provider.send({ channel: 'email', to: address, subject: 'Your privacy request code', body });
      return;
    }
    const route = await smsRoute(workspaceId);
    await (route?.provider ?? providers.sms).send({
      channel: 'sms',
      to: address,
      body,
      ...(route?.templateIds
        ? {
            providerTemplate: {
              ids: route.templateIds,
              language: 'en',
              variables: [
                ['otp', code],
                ['minutes', String(minutes)],
              ],
            },
          }
        : {}),
    });
  };
}

/** Sign-in: a workspace's sign-in codes go through its own SMS gateway where it has one that can carry them. */
function buildAuth(
  deps: AppDeps,
  log: FastifyBaseLogger,
  parts: {
    users: UsersService;
    sms: MessageProvider;
    accountProviders: AccountProviders;
    tokenOwners: TokenOwners;
  },
): AuthService {
  const { config, db } = deps;
  const { users, sms, accountProviders, tokenOwners } = parts;
  return new AuthService({
    db: db.kysely,
    config,
    users,
    sms,
    otpRoute: smsCodeRoute(db, accountProviders),
    log,
    tokenOwners,
  });
}
