import { fileURLToPath } from 'node:url';
import type { FastifyBaseLogger, FastifyInstance, RawServerDefault } from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Redis } from 'ioredis';
import { consoleRoutes } from './http/console.ts';
import { RateLimits } from './http/rate-limit.ts';
import { auditRoutes } from './modules/audit/audit.routes.ts';
import { AuditService } from './modules/audit/audit.service.ts';
import { authRoutes } from './modules/auth/auth.routes.ts';
import { AuthService } from './modules/auth/auth.service.ts';
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
import { type MessageChannel } from './domain.ts';
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
import type { Providers } from './providers/provider.ts';
import { AccountPace, AccountProviders, publicBase } from './modules/sending/accounts.ts';
import { channelAccountsRoutes } from './modules/channel-accounts/channel-accounts.routes.ts';
import { ChannelAccountsService } from './modules/channel-accounts/channel-accounts.service.ts';
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
import { fieldRoutes } from './modules/field/field.routes.ts';
import { PollDayService } from './modules/field/poll-day.ts';
import { TurfsService } from './modules/field/turfs.ts';
import { VisitsService } from './modules/field/visits.ts';
import { SurveysService } from './modules/surveys/surveys.service.ts';
import { SurveyRunsService } from './modules/surveys/survey-runs.service.ts';
import { privacyRoutes } from './modules/privacy/privacy.routes.ts';
import { privacyPageRoutes } from './modules/privacy/privacy-page.routes.ts';
import { insertRequest, PrivacyService } from './modules/privacy/privacy.service.ts';
import { Erasure } from './modules/privacy/erasure.ts';
import { type CodeSender, PublicRequests } from './modules/privacy/public-requests.ts';
import type { Config } from './config.ts';
import type { Db } from './db/connect.ts';

/** The app as buildApp makes it (TypeBox schemas give the routes their types). */
type App = FastifyInstance<
  RawServerDefault,
  IncomingMessage,
  ServerResponse,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

/** What the routes are built from: the settings and the database. */
interface AppDeps {
  config: Readonly<Config>;
  db: Db;
}

/**
 * The routes of every module, registered in order, with the services they are given: buildApp (app.ts) calls
 * these after the hooks and the guard are installed.
 */

/** What buildApp makes once and the routes share. */
export interface Shared {
  redis: Redis | undefined;
  rateLimits: RateLimits;
  auth: AuthService;
  users: UsersService;
  voters: VotersService;
  grievances: GrievancesService;
  payments: PaymentsService;
  webhooks: WebhooksService;
  deploymentNames: Record<MessageChannel, string>;
}

/** The console, health, sign-in, the team, the workspace, voters and their imports and exports, grievances, payments and webhooks. */
export async function registerPeopleRoutes(
  app: App,
  deps: AppDeps,
  shared: Shared,
): Promise<IdempotencyService> {
  const { config, db } = deps;
  const { redis, rateLimits, auth, users, voters, grievances, payments, webhooks, deploymentNames } = shared;
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

  return idempotency;
}

/** Messages, campaigns, consent, templates, channel accounts, conversations, the live stream, surveys and the providers' callbacks. */
export async function registerMessagingRoutes(
  app: App,
  deps: AppDeps,
  shared: Shared & {
    providers: Providers;
    accountProviders: AccountProviders;
    idempotency: IdempotencyService;
  },
): Promise<{ messages: MessagesService; inbound: InboundService }> {
  const { config, db } = deps;
  const { redis, deploymentNames, providers, accountProviders, idempotency } = shared;
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
  const inbound = new InboundService({
    db: db.kysely,
    defaultCountry: config.defaultCountry,
    // ERASE or MYDATA: a request from the address it came from, `open` until the office verifies it.
    privacyRequest: async (trx, workspaceId, actor, { type, from, channel, body }) => {
      const note = `Replied "${body.trim().slice(0, 40)}" by ${channel}.`;
      const input = {
        type,
        address: from,
        voterId: null,
        note,
        via: 'keyword' as const,
        status: 'open' as const,
      };
      await insertRequest(trx, workspaceId, actor, input, config.privacy.responseDays);
    },
  });
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
  return { messages, inbound };
}

/** Conversations, quick replies, the live stream, surveys and the providers' callbacks. */
export async function registerInboxRoutes(
  app: App,
  deps: AppDeps,
  shared: Shared & { accountProviders: AccountProviders; messages: MessagesService; inbound: InboundService },
): Promise<void> {
  const { config, db } = deps;
  const { auth, grievances, deploymentNames, accountProviders, messages, inbound } = shared;
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
  const turfs = new TurfsService({ db: db.kysely });
  await app.register(fieldRoutes, {
    prefix: '/api',
    turfs,
    visits: new VisitsService({ db: db.kysely, turfs }),
    pollDay: new PollDayService({ db: db.kysely }),
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
}

/** Personal data: the privacy notice, data-principal requests, export and erasure, breaches, and the public page. */
export async function registerPrivacyRoutes(
  app: App,
  deps: AppDeps,
  shared: { rateLimits: RateLimits; sendCode: CodeSender },
): Promise<PublicRequests> {
  const { config, db } = deps;
  const responseDays = config.privacy.responseDays;
  await app.register(privacyRoutes, {
    prefix: '/api',
    db: db.kysely,
    privacy: new PrivacyService({ db: db.kysely, defaultCountry: config.defaultCountry, responseDays }),
    erasure: new Erasure({ db, appKey: config.appKey }),
  });
  const requests = new PublicRequests({
    db: db.kysely,
    appKey: config.appKey,
    defaultCountry: config.defaultCountry,
    responseDays,
    sendCode: shared.sendCode,
    log: app.log,
  });
  await app.register(privacyPageRoutes, {
    db: db.kysely,
    requests,
    rateLimits: shared.rateLimits,
    responseDays,
  });
  return requests;
}
