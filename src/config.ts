import { isIP } from 'node:net';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, resolve } from 'node:path';
import { isTimeZone, parseWindow, type QuietHours } from './lib/quiet-hours.ts';

export type {
  Config,
  DatabaseSettings,
  WebhookSettings,
  DeliverySettings,
  ApiDeprecation,
  DeploymentAccount,
  ProviderEnv,
  ProviderName,
} from './config.types.ts';
import {
  type ApiDeprecation,
  type Config,
  type DatabaseSettings,
  type DeploymentAccount,
  type ProviderEnv,
  type ProviderName,
} from './config.types.ts';
import { fieldFromText, fieldProblem, fieldsOfSchema, type ProviderAdapter } from './providers/adapter.ts';
import { adapters, defaultDeploymentProvider, deploymentAdapters } from './providers/registry.ts';
import type { Channel } from './providers/provider.ts';

export class ConfigError extends Error {
  constructor(variable: string, problem: string) {
    super(`Invalid configuration: ${variable} ${problem}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, `must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max)
    throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new ConfigError(name, `must be true or false, got "${env[name]}"`);
}

/**
 * TRUST_PROXY: `false` (default); `true` (every hop: the leftmost X-Forwarded-For address, so the proxy must
 * overwrite the header); a whole number of proxies in front (the address that many hops from the right); or a
 * comma-separated list of the proxies' addresses or CIDR ranges (the rightmost address that is not one of them).
 * The last two cannot be spoofed by a client that sends its own X-Forwarded-For.
 */
function trustProxy(env: Env): boolean | number | string[] {
  const raw = env.TRUST_PROXY?.trim() ?? '';
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops < 1 || hops > 10) throw new ConfigError('TRUST_PROXY', `a hop count must be 1-10, got ${raw}`);
    return hops;
  }
  if (/[.:]/.test(raw)) {
    const list = raw.split(',').map((part) => part.trim());
    const address = /^[0-9a-fA-F.:]+(\/\d{1,3})?$/;
    const bad = list.find((part) => !address.test(part) || isIP(part.split('/')[0] ?? '') === 0);
    if (bad !== undefined)
      throw new ConfigError('TRUST_PROXY', `"${bad}" is not an IP address or CIDR range (e.g. 10.0.0.0/8)`);
    return list;
  }
  try {
    return bool(env, 'TRUST_PROXY', false);
  } catch {
    throw new ConfigError(
      'TRUST_PROXY',
      `must be true, false, a number of proxies (1-10) or a comma-separated list of proxy addresses, got "${raw}"`,
    );
  }
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return fallback;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${raw}"`);
  }
  return raw as T;
}

/** Comma-separated whole seconds, e.g. `5,300,1800`; each at most 7 days, at most 20 of them. */
function retrySchedule(env: Env, name: string, fallback: readonly number[]): readonly number[] {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return fallback;
  const parts = raw.split(',').map((part) => part.trim());
  if (parts.length > 20) throw new ConfigError(name, `may list at most 20 delays, got ${parts.length}`);
  return parts.map((part) => {
    if (!/^\d+$/.test(part) || Number(part) > 7 * 24 * 3600) {
      throw new ConfigError(
        name,
        `must be comma-separated whole seconds (each 0-604800), e.g. "5,300,1800"; got "${raw}"`,
      );
    }
    return Number(part);
  });
}

function date(env: Env, name: string): Date | undefined {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return undefined;
  const value = new Date(raw);
  if (Number.isNaN(value.getTime())) throw new ConfigError(name, `must be an ISO 8601 date, got "${raw}"`);
  return value;
}

function databaseUrl(env: Env): string {
  const raw = env.DATABASE_URL?.trim() || DEFAULT_DATABASE_URL;
  if (raw.startsWith('sqlite:') || raw.startsWith('postgres://') || raw.startsWith('postgresql://'))
    return raw;
  throw new ConfigError(
    'DATABASE_URL',
    `must start with sqlite: or postgres://, got "${raw.split(':')[0]}:..."`,
  );
}

export function databaseSettings(env: Env): DatabaseSettings {
  const bulkPoolSize = int(env, 'DB_BULK_POOL_SIZE', 4, 1, 100);
  return {
    statementTimeoutMs: int(env, 'DB_STATEMENT_TIMEOUT_MS', 10_000, 100, 3_600_000),
    acquireTimeoutMs: int(env, 'DB_POOL_ACQUIRE_TIMEOUT_MS', 5_000, 100, 600_000),
    bulkPoolSize,
    bulkPerWorkspace: Math.min(
      bulkPoolSize,
      int(env, 'DB_BULK_PER_WORKSPACE', Math.max(1, Math.floor(bulkPoolSize / 4)), 1, 100),
    ),
    bulkQueueTimeoutMs: int(env, 'DB_BULK_QUEUE_TIMEOUT_MS', 30_000, 100, 600_000),
  };
}

/**
 * APP_KEY is 64 hex characters or base64 of 32 bytes. When it is not set, a key is generated once and kept
 * in `data/app.key` so that one machine keeps working across restarts; several machines must share APP_KEY.
 */
function appKey(env: Env, keyFile: string | undefined): Buffer {
  const raw = env.APP_KEY?.trim();
  if (raw) {
    const key = /^[0-9a-fA-F]{64}$/.test(raw) ? Buffer.from(raw, 'hex') : Buffer.from(raw, 'base64');
    if (key.length !== 32)
      throw new ConfigError('APP_KEY', 'must be 32 bytes as 64 hex characters or base64');
    return key;
  }
  if (!keyFile) return randomBytes(32);
  if (existsSync(keyFile)) return Buffer.from(readFileSync(keyFile, 'utf8').trim(), 'hex');
  const key = randomBytes(32);
  mkdirSync(dirname(keyFile), { recursive: true });
  writeFileSync(keyFile, key.toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
  return key;
}

function apiDeprecation(env: Env): ApiDeprecation | undefined {
  const versions = (env.API_DEPRECATED_VERSIONS ?? '')
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);
  if (versions.length === 0) return undefined;
  for (const v of versions) {
    if (!/^v\d+$/.test(v)) throw new ConfigError('API_DEPRECATED_VERSIONS', `has "${v}"; use names like v1`);
  }
  const guide = env.API_MIGRATION_GUIDE_URL?.trim() || undefined;
  if (guide && !/^https?:\/\//.test(guide)) throw new ConfigError('API_MIGRATION_GUIDE_URL', 'must be a URL');
  return {
    versions,
    deprecatedAt: date(env, 'API_DEPRECATION_DATE') ?? new Date(),
    sunsetAt: date(env, 'API_SUNSET_DATE'),
    migrationGuideUrl: guide,
  };
}

function url(env: Env, name: string, fallback?: string): string | undefined {
  const raw = env[name]?.trim() || fallback;
  if (raw === undefined) return undefined;
  if (!/^https?:\/\/[^\s]+$/.test(raw)) throw new ConfigError(name, `must be an http(s) URL, got "${raw}"`);
  return raw.replace(/\/+$/, '');
}

/**
 * Each provider's API base URL (`api.env`, or its earlier name `api.alias`, else its default) and the other
 * variables its adapter declares, checked against their patterns.
 */
function providerEnv(env: Env): Record<string, ProviderEnv> {
  return Object.fromEntries(
    adapters.map((adapter) => {
      const api = adapter.api;
      const apiUrl = !api
        ? ''
        : api.alias && !env[api.env]?.trim()
          ? (url(env, api.alias, api.url) as string)
          : (url(env, api.env, api.url) as string);
      const values: Record<string, string> = {};
      for (const [name, [fallback, pattern, what]] of Object.entries(adapter.env ?? {})) {
        const raw = env[name]?.trim() || fallback;
        if (!pattern.test(raw)) throw new ConfigError(name, `must be ${what}, got "${raw}"`);
        values[name] = raw;
      }
      return [adapter.name, { apiUrl, values }];
    }),
  );
}

/**
 * The settings and credentials of a deployment provider that a channel uses, from `<PREFIX>_<NAME>` (each of
 * its adapter's fields): a required one missing, or a malformed one, stops the service with the variable named.
 */
function deploymentAccount(env: Env, adapter: ProviderAdapter, usedBy: string[]): DeploymentAccount {
  const spec = adapter.deployment!;
  const variable = (name: string) => spec.names?.[name] ?? `${spec.prefix}_${name.toUpperCase()}`;
  const read = (schema: ProviderAdapter['settings'], secret: boolean) => {
    const values: Record<string, string | number | boolean> = {};
    for (const [name, field, required] of fieldsOfSchema(schema)) {
      const key = variable(name);
      const raw = secret ? env[key] : env[key]?.trim();
      if (!raw?.trim()) {
        if (required) throw new ConfigError(key, `is required when ${usedBy.join(' or ')}`);
        continue;
      }
      const value = fieldFromText(field, raw);
      const problem = fieldProblem(field, value);
      if (problem) throw new ConfigError(key, `${problem.replace(/\.$/, '')}, got "${secret ? '…' : raw}"`);
      values[name] = value;
    }
    return values;
  };
  return {
    settings: read(adapter.settings, false),
    credentials: read(adapter.credentials, true) as Record<string, string>,
  };
}

/**
 * PROVIDER_TIMEOUT_MS: at most half of WORKER_LEASE_SECONDS, so a provider call always ends (or is given up)
 * well before its claim could pass to another worker. Unset: 10 s, or a quarter of a shorter lease.
 */
function providerTimeout(env: Env, leaseSeconds: number): number {
  const most = Math.floor((leaseSeconds * 1000) / 2);
  const value = int(env, 'PROVIDER_TIMEOUT_MS', Math.min(10_000, Math.floor(most / 2)), 100);
  if (value > most) {
    throw new ConfigError(
      'PROVIDER_TIMEOUT_MS',
      `must be at most half of WORKER_LEASE_SECONDS (${most} ms), got ${value}`,
    );
  }
  return value;
}

/** `<CHANNEL>_PROVIDER`: a deployment provider that serves the channel (default the sandbox). */
function providerFor(env: Env, channel: Channel): ProviderName {
  const allowed = deploymentAdapters.filter((a) => a.channels.includes(channel)).map((a) => a.name);
  return oneOf(env, `${channel.toUpperCase()}_PROVIDER`, allowed, defaultDeploymentProvider);
}

export interface LoadConfigOptions {
  /** Where to keep a generated APP_KEY; undefined keeps a generated key in memory only (tests). */
  keyFile?: string | undefined;
}

export function loadConfig(env: Env = process.env, options: LoadConfigOptions = {}): Readonly<Config> {
  // At most 10 years: a larger lifetime gives an expiry date past what a timestamp can hold.
  const ttl = int(env, 'TOKEN_TTL_SECONDS', 0, 0, 315_360_000);
  const country = (env.DEFAULT_COUNTRY?.trim() || 'IN').toUpperCase();
  if (!/^[A-Z]{2}$/.test(country))
    throw new ConfigError('DEFAULT_COUNTRY', 'must be a two-letter country code');
  const redisUrl = env.REDIS_URL?.trim() || undefined;
  if (redisUrl && !/^rediss?:\/\//.test(redisUrl))
    throw new ConfigError('REDIS_URL', 'must start with redis://');
  const providers = {
    sms: providerFor(env, 'sms'),
    whatsapp: providerFor(env, 'whatsapp'),
    email: providerFor(env, 'email'),
    ivr: providerFor(env, 'ivr'),
  } as const;
  const usedBy = (name: string) =>
    Object.entries(providers)
      .filter(([, provider]) => provider === name)
      .map(([channel]) => `${channel.toUpperCase()}_PROVIDER=${name}`);
  const leaseSeconds = int(env, 'WORKER_LEASE_SECONDS', 60, 1);
  const config: Config = {
    port: int(env, 'PORT', 3000, 0, 65535),
    host: env.HOST?.trim() || '0.0.0.0',
    databaseUrl: databaseUrl(env),
    database: databaseSettings(env),
    shutdownTimeoutMs: int(env, 'SHUTDOWN_TIMEOUT_MS', 10_000, 100, 600_000),
    shutdownDrainMs: int(env, 'SHUTDOWN_DRAIN_MS', 0, 0, 600_000),
    redisUrl,
    redisTimeoutMs: int(env, 'REDIS_TIMEOUT_MS', 500, 10, 60_000),
    redisPrefix: redisPrefix(env),
    corsOrigins: corsOrigins(env),
    logLevel: oneOf(env, 'LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info'),
    trustProxy: trustProxy(env),
    appKey: appKey(env, options.keyFile),
    bodyLimitBytes: int(env, 'BODY_LIMIT_BYTES', 1024 * 1024, 1024),
    defaultCountry: country,
    tokenTtlSeconds: ttl > 0 ? ttl : undefined,
    registration: oneOf(env, 'REGISTRATION', ['open', 'closed'], 'open'),
    auditRetentionDays: int(env, 'AUDIT_RETENTION_DAYS', 365, 365, 36_500),
    surveySessionHours: int(env, 'SURVEY_SESSION_HOURS', 24, 1, 720),
    otp: {
      ttlSeconds: int(env, 'OTP_TTL_SECONDS', 300, 30),
      maxAttempts: int(env, 'OTP_MAX_ATTEMPTS', 5, 1),
    },
    signupCredits: {
      sms: int(env, 'SIGNUP_CREDITS_SMS', 100),
      whatsapp: int(env, 'SIGNUP_CREDITS_WHATSAPP', 100),
      email: int(env, 'SIGNUP_CREDITS_EMAIL', 100),
    },
    rateLimits: rateLimits(env),
    apiDeprecation: apiDeprecation(env),
    providers,
    sandboxDeliveryDelayMs: int(env, 'SANDBOX_DELIVERY_DELAY_MS', 500),
    ...importExportSettings(env),
    webhooks: webhookSettings(env),
    broadcastMaxRecipients: int(env, 'BROADCAST_MAX_RECIPIENTS', 10_000, 1, 1_000_000),
    delivery: deliverySettings(env, leaseSeconds),
    providerEnv: providerEnv(env),
    deployment: Object.fromEntries(
      deploymentAdapters
        .filter((a) => usedBy(a.name).length > 0)
        .map((a) => [a.name, deploymentAccount(env, a, usedBy(a.name))]),
    ),
    eventStreamsPerUser: int(env, 'EVENT_STREAMS_PER_USER', 5, 1, 1000),
    eventStreamBufferBytes: int(env, 'EVENT_STREAM_BUFFER_KB', 256, 16, 65536) * 1024,
    quietHours: quietHours(env),
    defaultTimeZone: env.QUIET_HOURS_TZ?.trim() || 'Asia/Kolkata',
    publicBaseUrl: url(env, 'PUBLIC_BASE_URL'),
    dltEnforce: bool(env, 'DLT_ENFORCE', false),
    privacy: {
      requireConsent: bool(env, 'PRIVACY_REQUIRE_CONSENT', false),
      responseDays: int(env, 'PRIVACY_RESPONSE_DAYS', 30, 1, 90),
    },
  };
  return Object.freeze(config);
}

/** IMPORT_* and EXPORT_*: upload limits, error rows kept, job retention, export threads and limits. */
function importExportSettings(env: Env): Pick<Config, 'import' | 'export'> {
  return {
    import: {
      maxBytes: int(env, 'IMPORT_MAX_BYTES', 100 * 1024 * 1024, 1),
      maxErrors: int(env, 'IMPORT_MAX_ERRORS', 1000, 0, 1_000_000),
      jobRetentionDays: int(env, 'IMPORT_JOB_RETENTION_DAYS', 30, 1, 36_500),
    },
    export: {
      threads: int(env, 'EXPORT_THREADS', Math.min(2, availableParallelism()), 0, 64),
      minVoters: int(env, 'EXPORT_THREADS_MIN_VOTERS', 100_000, 1),
      maxConcurrent: int(env, 'EXPORT_MAX_CONCURRENT', 2, 1, 1000),
      idleTimeoutMs: int(env, 'EXPORT_IDLE_TIMEOUT_MS', 30_000, 100, 3_600_000),
    },
  };
}

/** RATE_LIMIT_*_PER_MIN: requests a minute per client, token or address (docs/configuration.md). */
function rateLimits(env: Env): Config['rateLimits'] {
  return {
    public: int(env, 'RATE_LIMIT_PUBLIC_PER_MIN', 60, 1),
    authenticated: int(env, 'RATE_LIMIT_AUTHENTICATED_PER_MIN', 120, 1),
    auth: int(env, 'RATE_LIMIT_AUTH_PER_MIN', 5, 1),
    authIp: int(env, 'RATE_LIMIT_AUTH_IP_PER_MIN', 60, 1),
    otp: int(env, 'RATE_LIMIT_OTP_PER_MIN', 3, 1),
    callback: int(env, 'RATE_LIMIT_CALLBACK_PER_MIN', 6000, 1),
    failedAuth: int(env, 'RATE_LIMIT_AUTH_FAILED_PER_MIN', 30, 1),
  };
}

/** WEBHOOK_*: retries, timeouts and how many deliveries run at once. */
function webhookSettings(env: Env): Config['webhooks'] {
  return {
    retrySchedule: retrySchedule(env, 'WEBHOOK_RETRY_SCHEDULE', [5, 300, 1800, 7200, 18000, 36000, 36000]),
    allowPrivateUrls: bool(env, 'WEBHOOK_ALLOW_PRIVATE_URLS', false),
    timeoutMs: int(env, 'WEBHOOK_TIMEOUT_SECONDS', 10, 1, 60) * 1000,
    pollIntervalMs: int(env, 'WEBHOOK_POLL_INTERVAL_MS', 1000, 10, 60_000),
    batchSize: int(env, 'WEBHOOK_BATCH_SIZE', 20, 1, 500),
    maxInFlight: int(env, 'WEBHOOK_MAX_IN_FLIGHT', 32, 1, 1000),
    maxInFlightPerEndpoint: int(env, 'WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT', 2, 1, 100),
    maxInFlightPerWorkspace: int(env, 'WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE', 8, 1, 1000),
  };
}

/** WORKER_* and the deployment providers' send rates: how the delivery worker claims, sends and retries. */
function deliverySettings(env: Env, leaseSeconds: number): Config['delivery'] {
  return {
    inProcess: bool(env, 'WORKER_IN_PROCESS', true),
    batchSize: int(env, 'WORKER_BATCH_SIZE', 500, 1, 5000),
    leaseSeconds,
    providerTimeoutMs: providerTimeout(env, leaseSeconds),
    unconfirmedAfterMs: int(env, 'UNCONFIRMED_AFTER_HOURS', 48, 1, 24 * 30) * 3_600_000,
    pollMs: int(env, 'WORKER_POLL_MS', 200, 1),
    retrySchedule: retrySchedule(env, 'DELIVERY_RETRY_SCHEDULE', [5, 30, 120, 600]),
    // <PREFIX>_SEND_RATE of each deployment provider (SANDBOX_SEND_RATE, ...).
    sendRate: Object.fromEntries(
      deploymentAdapters.map((a) => [a.name, int(env, `${a.deployment!.prefix}_SEND_RATE`, 0)]),
    ),
  };
}

/** QUIET_HOURS ("21:00-10:00" by default; empty turns it off) in QUIET_HOURS_TZ (Asia/Kolkata by default). */
function quietHours(env: Env): QuietHours | undefined {
  const timeZone = env.QUIET_HOURS_TZ?.trim() || 'Asia/Kolkata';
  if (!isTimeZone(timeZone)) {
    throw new ConfigError(
      'QUIET_HOURS_TZ',
      `must be an IANA time zone such as Asia/Kolkata, got "${timeZone}"`,
    );
  }
  const raw = env.QUIET_HOURS;
  if (raw !== undefined && raw.trim() === '') return undefined;
  const text = raw?.trim() ?? '21:00-10:00';
  const window = parseWindow(text);
  if (!window) {
    throw new ConfigError(
      'QUIET_HOURS',
      `must be HH:MM-HH:MM in 24-hour time with different ends, e.g. "21:00-10:00" (empty turns quiet hours off), got "${text}"`,
    );
  }
  return { ...window, timeZone, text };
}

/** The database when DATABASE_URL is unset: a SQLite file under the current directory. */
export const DEFAULT_DATABASE_URL = 'sqlite:./data/campaign.db';

/** The key file lives beside the SQLite database, or in ./data for PostgreSQL. */
export function defaultKeyFile(env: Env = process.env): string {
  const url = env.DATABASE_URL?.trim() || DEFAULT_DATABASE_URL;
  const path = url.startsWith('sqlite:') ? url.slice('sqlite:'.length) : '';
  const dir = path && path !== ':memory:' ? dirname(path) : './data';
  return resolve(dir, 'app.key');
}

function redisPrefix(env: Env): string {
  const raw = env.REDIS_PREFIX;
  if (raw === undefined) return 'ces:';
  const prefix = raw.trim();
  if (!/^[A-Za-z0-9:._{}-]{0,64}$/.test(prefix))
    throw new ConfigError(
      'REDIS_PREFIX',
      'must be at most 64 letters, digits or : . _ - { } (e.g. ces:staging:)',
    );
  return prefix;
}

function corsOrigins(env: Env): '*' | string[] | undefined {
  const raw = env.CORS_ORIGINS?.trim();
  if (!raw) return undefined;
  if (raw === '*') return '*';
  return raw.split(',').map((item) => {
    const origin = item.trim();
    let parsed: URL | undefined;
    try {
      parsed = new URL(origin);
    } catch {
      // reported below
    }
    if (!parsed || !/^https?:$/.test(parsed.protocol) || parsed.origin !== origin)
      throw new ConfigError(
        'CORS_ORIGINS',
        `"${origin}" is not an origin: give * or a comma-separated list such as https://app.example.org,http://localhost:5173 (scheme, host and port only, no path or trailing slash)`,
      );
    return origin;
  });
}
