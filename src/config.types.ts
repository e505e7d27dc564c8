/** The shape of the service's settings (src/config.ts reads them from the environment). */
import type { QuietHours } from './lib/quiet-hours.ts';

/** Every setting of the service, parsed and checked once at start. Nothing else reads process.env. */
export interface Config {
  readonly port: number;
  readonly host: string;
  readonly databaseUrl: string;
  readonly database: DatabaseSettings;
  /** On SIGTERM/SIGINT: how long requests in flight and the workers get to finish before the process exits. */
  readonly shutdownTimeoutMs: number;
  /** After SIGTERM, how long readyz answers 503 while every other request is still served (load balancers). */
  readonly shutdownDrainMs: number;
  readonly redisUrl: string | undefined;
  /** A Redis call that has not answered by then is left aside: rate limits count in memory until it answers. */
  readonly redisTimeoutMs: number;
  /** Starts every Redis key, so that deployments (and test runs) can share one Redis. */
  readonly redisPrefix: string;
  /** Browser origins allowed to call the API (CORS): undefined for none, '*' for any. */
  readonly corsOrigins: '*' | readonly string[] | undefined;
  readonly logLevel: string;
  /** Fastify's `trustProxy`: false, true (every hop), a hop count, or the proxies' addresses/CIDRs. */
  readonly trustProxy: boolean | number | string[];
  /** 32-byte key for HMACs (OTP codes) and for encrypting stored secrets. */
  readonly appKey: Buffer;
  readonly bodyLimitBytes: number;
  readonly defaultCountry: string;
  /** Lifetime of a new access token; undefined (TOKEN_TTL_SECONDS=0): no expiry. */
  readonly tokenTtlSeconds: number | undefined;
  /** `closed`: POST /api/auth/register is 403; workspaces are made with the CLI (create-workspace). */
  readonly registration: 'open' | 'closed';
  /** Audit-log rows older than this many days are deleted by the worker. */
  readonly auditRetentionDays: number;
  /** SURVEY_SESSION_HOURS: a survey session with no answer for this long ends (partial or no_answer). */
  readonly surveySessionHours: number;
  readonly otp: { readonly ttlSeconds: number; readonly maxAttempts: number };
  readonly signupCredits: { readonly sms: number; readonly whatsapp: number; readonly email: number };
  readonly rateLimits: {
    readonly public: number;
    readonly authenticated: number;
    /** Sign-in and sign-up per email (or phone): RATE_LIMIT_AUTH_PER_MIN. */
    readonly auth: number;
    /** Sign-in and sign-up per client address (a whole office on one network): RATE_LIMIT_AUTH_IP_PER_MIN. */
    readonly authIp: number;
    readonly otp: number;
    /** Delivery reports and replies from messaging providers, per client address. */
    readonly callback: number;
    /** Requests with a missing, bad, expired or revoked token, per client address. */
    readonly failedAuth: number;
  };
  readonly apiDeprecation: ApiDeprecation | undefined;
  readonly providers: {
    readonly sms: ProviderName;
    readonly whatsapp: ProviderName;
    readonly email: ProviderName;
    readonly ivr: ProviderName;
  };
  readonly sandboxDeliveryDelayMs: number;
  readonly import: {
    /** Largest voter CSV accepted by the import (413 above it). */
    readonly maxBytes: number;
    /** At most this many `{ row, field, message }` entries in an import's answer. */
    readonly maxErrors: number;
    /** Finished import jobs (the row and its errors.csv) are deleted this many days after they end. */
    readonly jobRetentionDays: number;
  };
  readonly export: {
    /** Worker threads that read and format one large export of a SQLite file; 0: none. */
    readonly threads: number;
    /** An export of fewer voters runs in the request's thread. */
    readonly minVoters: number;
    /** Exports of one workspace running at once; one more is 429 rate_limit_exceeded. */
    readonly maxConcurrent: number;
    /** An export that sends nothing for this long (the client stopped reading, or the database) is ended. */
    readonly idleTimeoutMs: number;
  };
  readonly webhooks: WebhookSettings;
  readonly broadcastMaxRecipients: number;
  readonly delivery: DeliverySettings;
  /**
   * Each provider's API base URL (its `<NAME>_BASE_URL`: regional endpoints, local test doubles) and the other
   * environment settings its adapter declares, by provider name.
   */
  readonly providerEnv: Readonly<Record<string, ProviderEnv>>;
  /** The settings and credentials of each deployment provider a channel uses (`<PREFIX>_*`), by name. */
  readonly deployment: Readonly<Record<string, DeploymentAccount>>;
  /** Open `GET /api/events/stream` connections a user may hold (in one API process). */
  readonly eventStreamsPerUser: number;
  /** EVENT_STREAM_BUFFER_KB in bytes: a stream whose client leaves this much unread is closed (it resumes). */
  readonly eventStreamBufferBytes: number;
  /** Bulk sms/whatsapp/ivr messages are held inside this daily window (QUIET_HOURS in QUIET_HOURS_TZ); undefined: off. */
  readonly quietHours: QuietHours | undefined;
  /** QUIET_HOURS_TZ: the time zone of a workspace that sets none (the console shows times in it). */
  readonly defaultTimeZone: string;
  /** This service's public URL (PUBLIC_BASE_URL): one-click unsubscribe links and the deployment's provider callbacks point there. */
  readonly publicBaseUrl: string | undefined;
  /** DLT_ENFORCE: an SMS needs a tpl_ template with a DLT template id and a sender id. */
  readonly dltEnforce: boolean;
  /** PRIVACY_*: bulk messages only to voters whose consent is `given`; days to answer a data-principal request. */
  readonly privacy: { readonly requireConsent: boolean; readonly responseDays: number };
}

/** Time limits of database calls (see src/db/connect.ts): when one passes the request answers 503. */
export interface DatabaseSettings {
  /** PostgreSQL statement_timeout of the API's queries (and their client-side read timeout, a little later). */
  readonly statementTimeoutMs: number;
  /** Longest wait for a pooled connection, a new connection's handshake included. */
  readonly acquireTimeoutMs: number;
  /** PostgreSQL: connections of the separate pool that voter imports and exports use. */
  readonly bulkPoolSize: number;
  /** PostgreSQL: of those, the most one workspace holds at once (the rest of its files wait their turn). */
  readonly bulkPerWorkspace: number;
  /** How long an import or export waits for a bulk connection before answering 503. */
  readonly bulkQueueTimeoutMs: number;
}

export interface WebhookSettings {
  /** Seconds to wait before each retry; a delivery makes at most `retrySchedule.length + 1` attempts. */
  readonly retrySchedule: readonly number[];
  /** Lifts the SSRF rules (private, loopback, link-local addresses) for local use and tests. */
  readonly allowPrivateUrls: boolean;
  /** Time limit of one delivery attempt (connect, send, response headers). */
  readonly timeoutMs: number;
  /** How often the delivery worker looks for due deliveries when it found none. */
  readonly pollIntervalMs: number;
  /** Most deliveries claimed in one pass of the loop. */
  readonly batchSize: number;
  /** Attempts in flight in one worker process, all endpoints together. */
  readonly maxInFlight: number;
  /** Attempts in flight to one endpoint (all worker processes together): a slow receiver holds only these. */
  readonly maxInFlightPerEndpoint: number;
  /** Attempts in flight to one workspace's endpoints (all worker processes together). */
  readonly maxInFlightPerWorkspace: number;
}

export interface DeliverySettings {
  /** Run the delivery worker inside the API process (`npm start`). */
  readonly inProcess: boolean;
  readonly batchSize: number;
  readonly leaseSeconds: number;
  readonly pollMs: number;
  /** Seconds to wait before each retry of a provider error; its length + 1 is the number of attempts. */
  readonly retrySchedule: readonly number[];
  /** Messages per second per provider and worker process; 0 is unlimited. */
  readonly sendRate: Readonly<Record<ProviderName, number>>;
  /**
   * Time limit of one provider call (worker and `POST /api/messages/send`); past it the call counts as a
   * retryable provider error. At most half the lease, so a claim never runs out while its call is open.
   */
  readonly providerTimeoutMs: number;
  /** UNCONFIRMED_AFTER_HOURS: a message whose provider never answered, with no report since, fails after this. */
  readonly unconfirmedAfterMs: number;
}

export interface ProviderEnv {
  readonly apiUrl: string;
  readonly values: Readonly<Record<string, string>>;
}

export interface DeploymentAccount {
  readonly settings: Readonly<Record<string, string | number | boolean>>;
  readonly credentials: Readonly<Record<string, string>>;
}

export interface ApiDeprecation {
  /** API versions that answer with deprecation headers, e.g. ["v1"]. */
  readonly versions: readonly string[];
  readonly deprecatedAt: Date;
  readonly sunsetAt: Date | undefined;
  readonly migrationGuideUrl: string | undefined;
}

/** A provider's name (its adapter's, src/providers/registry.ts). */
export type ProviderName = string;
