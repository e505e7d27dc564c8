import type { FastifyBaseLogger } from 'fastify';
import type { Redis } from 'ioredis';
import type { Config } from '../../config.ts';
import type { ChannelAccountRow } from '../../db/schema.ts';
import { SecretBox } from '../../lib/secret-box.ts';
import type { Channel, MessageProvider } from '../../providers/provider.ts';
import { adapterNamed, buildProvider } from '../../providers/registry.ts';
import { accountRef } from '../../refs.ts';

export type AccountsConfig = Pick<
  Config,
  'appKey' | 'providerEnv' | 'publicBaseUrl' | 'port' | 'delivery' | 'sandboxDeliveryDelayMs' | 'redisPrefix'
>;

/** Where the service is reached from outside: PUBLIC_BASE_URL, else localhost on PORT. */
export function publicBase(config: Pick<Config, 'publicBaseUrl' | 'port'>): string {
  return config.publicBaseUrl ?? `http://localhost:${config.port}`;
}

/**
 * The token in a callback URL (or path), as `$2`: the segment after `/providers/<provider>/<account>/`, whatever
 * follows it (a segment too many is a 404, and logged too). Logs and the channel log hide it with this.
 */
export const CALLBACK_TOKEN = /(\/providers\/[^/]+\/[^/]+\/)([^/?#]+)/;

/** The callback URL of kind `kind` (`status`, `inbound`, ...) of an account, as its provider is told it. */
export function callbackUrl(base: string, row: ChannelAccountRow, token: string, kind: string): string {
  return `${base}/api/providers/${row.provider}/${accountRef(row.id)}/${token}/${kind}`;
}

/** How many accounts' providers and secret values a process keeps built (the most recently used). */
const ACCOUNTS_CACHED = 500;

/** Seals and opens channel-account secrets (credentials, callback and verify tokens) under APP_KEY. */
export function accountSecretBox(appKey: Buffer): SecretBox {
  return new SecretBox(appKey, 'channel-accounts');
}

/**
 * The providers of channel accounts, built from each account's settings and its credentials (opened only
 * here, in memory, to make the provider) and kept while the account is unchanged (`updated_at`).
 */
export class AccountProviders {
  private readonly box: SecretBox;
  /** Both caches keep the ACCOUNTS_CACHED accounts used last (a deleted account's entries age out). */
  private readonly built = new Map<string, { updatedAt: string; provider: MessageProvider }>();
  private readonly secretValues = new Map<number, { updatedAt: string; values: readonly string[] }>();

  constructor(private readonly deps: { config: AccountsConfig; log: FastifyBaseLogger }) {
    this.box = accountSecretBox(deps.config.appKey);
  }

  /** The account's provider for `channel` (the account serves it: the caller checked). */
  providerFor(row: ChannelAccountRow, channel: Channel): MessageProvider {
    const key = `${row.id}:${channel}`;
    const known = this.built.get(key);
    this.built.delete(key);
    if (known && known.updatedAt === String(row.updated_at)) {
      this.built.set(key, known);
      return known.provider;
    }
    known?.provider.close?.();
    const provider = this.build(row, channel);
    this.built.set(key, { updatedAt: String(row.updated_at), provider });
    for (const [oldest, entry] of this.built) {
      if (this.built.size <= ACCOUNTS_CACHED) break;
      entry.provider.close?.();
      this.built.delete(oldest);
    }
    return provider;
  }

  /** The secret in the account's callback URLs; undefined when it was sealed under another APP_KEY. */
  callbackToken(row: ChannelAccountRow): string | undefined {
    return this.box.openOr(row.callback_token);
  }

  verifyToken(row: ChannelAccountRow): string | undefined {
    return row.verify_token ? this.box.openOr(row.verify_token) : undefined;
  }

  /** Whether this process can open the account's secrets (false: they were sealed under another APP_KEY). */
  readable(row: ChannelAccountRow): boolean {
    return this.box.openOr(row.credentials) !== undefined && this.callbackToken(row) !== undefined;
  }

  /** The account's credentials: for the callbacks that check a provider's signature. */
  credentials(row: ChannelAccountRow): Record<string, string> {
    return JSON.parse(this.box.open(row.credentials)) as Record<string, string>;
  }

  /**
   * The account's credential values, to hide wherever they appear in the channel log: opened once while the
   * account is unchanged (a drain logs every call), not on each call.
   */
  secrets(row: ChannelAccountRow): readonly string[] {
    const known = this.secretValues.get(row.id);
    this.secretValues.delete(row.id);
    const values =
      known && known.updatedAt === String(row.updated_at)
        ? known.values
        : Object.values(this.credentials(row));
    this.secretValues.set(row.id, { updatedAt: String(row.updated_at), values });
    for (const oldest of this.secretValues.keys()) {
      if (this.secretValues.size <= ACCOUNTS_CACHED) break;
      this.secretValues.delete(oldest);
    }
    return values;
  }

  close(): void {
    for (const { provider } of this.built.values()) provider.close?.();
    this.built.clear();
    this.secretValues.clear();
  }

  private build(row: ChannelAccountRow, channel: Channel): MessageProvider {
    const { config, log } = this.deps;
    const base = publicBase(config);
    const token = this.callbackToken(row) ?? '';
    return buildProvider(adapterNamed(row.provider), config, log, {
      channel,
      settings: JSON.parse(row.settings) as Record<string, string | number | boolean>,
      credentials: this.credentials(row),
      callbackUrl: (kind) => callbackUrl(base, row, token, kind),
      ownAccount: true,
    });
  }
}

/**
 * Reserves `count` messages at `rate` per second on the key's schedule: each reservation takes
 * `count / rate` seconds of it, starting when the previous one ends (a shared "next free time", as GCRA keeps),
 * so the messages handed over never run ahead of the rate by more than one reservation, and a reservation that
 * would start more than `maxWaitMs` from now is not made (-1). Redis's own clock (TIME) is used, so every
 * process shares one schedule. Returns the wait in ms before the reservation's messages may go.
 */
const RESERVE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nextFree = tonumber(redis.call('GET', KEYS[1]) or '0')
local start = math.max(now, nextFree)
if start - now > tonumber(ARGV[2]) then return -1 end
local finish = start + tonumber(ARGV[1])
redis.call('SET', KEYS[1], tostring(finish), 'PX', math.ceil(finish - now) + 1000)
return start - now`;

/** No reservation within the longest wait allowed: the caller gives the messages back for later. */
export class PaceUnavailable extends Error {
  constructor(readonly reason: 'busy' | 'redis') {
    super(
      reason === 'busy'
        ? "The account's send rate has no room within this message's lease."
        : "The account's send rate cannot be checked: Redis does not answer.",
    );
    this.name = 'PaceUnavailable';
  }
}

/**
 * An account's `send_rate_per_second`, held across every process through Redis where REDIS_URL is set (one
 * schedule per account, reserved by a script), else in this process. A batch of n messages takes n of the
 * allowance (callers split batches larger than a second's). A wait is bounded (`maxWaitMs`): past it, or when
 * Redis does not answer, PaceUnavailable is thrown and nothing is sent (never unpaced).
 */
export class AccountPace {
  private readonly local = new Map<number, number>();

  constructor(private readonly deps: { redis?: Redis | undefined; prefix: string }) {}

  /** Waits until `count` more messages of the account may go at `rate` per second (0 or null: no limit). */
  async take(accountId: number, rate: number | null, count = 1, maxWaitMs = 30_000): Promise<void> {
    if (!rate || rate <= 0) return;
    const cost = (count * 1000) / rate;
    const { redis, prefix } = this.deps;
    let wait: number;
    if (redis) {
      try {
        wait = Number(
          await redis.eval(
            RESERVE,
            1,
            `${prefix}pace:${accountRef(accountId)}`,
            String(cost),
            String(maxWaitMs),
          ),
        );
      } catch {
        throw new PaceUnavailable('redis');
      }
      if (!Number.isFinite(wait)) throw new PaceUnavailable('redis');
    } else {
      const now = performance.now();
      const start = Math.max(now, this.local.get(accountId) ?? 0);
      wait = start - now > maxWaitMs ? -1 : start - now;
      if (wait >= 0) this.local.set(accountId, start + cost);
    }
    if (wait < 0) throw new PaceUnavailable('busy');
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
}
