import type { Redis } from 'ioredis';
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
} from 'rate-limiter-flexible';
import type { Config } from '../config.ts';
import { within } from '../lib/time-limit.ts';

export const buckets = [
  'public',
  'authenticated',
  'auth',
  'authIp',
  'otp',
  'callback',
  'failedAuth',
] as const;
export type Bucket = (typeof buckets)[number];

export interface RateLimitState {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
}

/** What the rate limits say in the log: once when Redis stops answering, once when it answers again. */
export interface RateLimitLog {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

const WINDOW_SECONDS = 60;
/** While Redis is down, how often one request checks (in the background) whether it answers again. */
const PROBE_INTERVAL_MS = 1000;

const silentLog: RateLimitLog = { warn: () => {}, info: () => {} };

class RedisTimeout extends Error {
  constructor(ms: number) {
    super(`Redis did not answer within ${ms} ms`);
  }
}

/**
 * The buckets of the contract (and one for providers' delivery callbacks, one for failed authentication),
 * each a fixed one-minute window per key.
 *
 * Every request is counted in this process's memory. With Redis, it is counted there as well, so that every
 * API process enforces the same limit (rate-limiter-flexible keeps that atomic: a Lua INCR + PEXPIRE), and a
 * request passes only if both counts allow it. A Redis call that does not answer within `REDIS_TIMEOUT_MS`
 * (or fails) leaves the decision to the memory count, which has seen every request of the window, so a Redis
 * cut mid-minute neither hangs requests nor restarts the counters; the memory count also keeps holding the
 * requests of the outage once Redis is back. After a failure Redis is skipped (no waiting) until the client
 * reconnects or a background probe finds it answering; each change is logged once.
 */
export class RateLimits {
  private readonly memory: Record<Bucket, RateLimiterMemory>;
  private readonly shared: Record<Bucket, RateLimiterAbstract> | undefined;
  private readonly timeoutMs: number;
  private redisDown = false;
  private lastProbe = 0;
  private probing = false;

  constructor(
    config: Pick<Config, 'rateLimits'> & { redisTimeoutMs?: number },
    private readonly redis?: Redis,
    keyPrefix = 'ces:rl',
    private readonly log: RateLimitLog = silentLog,
  ) {
    this.timeoutMs = config.redisTimeoutMs ?? 500;
    // A client that (re)connects is used again at once: no request has to wait for the next probe. This is
    // also what ends the memory-only start of a process whose first requests came before Redis connected.
    redis?.on('ready', () => this.markUp());
    const each = <T>(make: (bucket: Bucket) => T) =>
      Object.fromEntries(buckets.map((bucket) => [bucket, make(bucket)])) as Record<Bucket, T>;
    this.memory = each(
      (bucket) =>
        new RateLimiterMemory({
          points: config.rateLimits[bucket],
          duration: WINDOW_SECONDS,
          keyPrefix: `${keyPrefix}:${bucket}`,
        }),
    );
    this.shared = redis
      ? each(
          (bucket) =>
            new RateLimiterRedis({
              storeClient: redis,
              points: config.rateLimits[bucket],
              duration: WINDOW_SECONDS,
              keyPrefix: `${keyPrefix}:${bucket}`,
              // A client that is not connected fails at once instead of queueing the call.
              rejectIfRedisNotReady: true,
            }),
        )
      : undefined;
  }

  /** True while Redis has stopped answering and the limits are counted in memory alone. */
  get usingMemoryOnly(): boolean {
    return this.shared === undefined || this.redisDown;
  }

  async consume(bucket: Bucket, key: string): Promise<RateLimitState> {
    const limit = this.memory[bucket].points;
    const local = await outcome(this.memory[bucket].consume(key));
    let decision = local;
    const shared = this.shared?.[bucket];
    if (shared) {
      if (this.redisDown) this.probe();
      else {
        try {
          const global = await outcome(this.withTimeout(shared.consume(key)));
          // The stricter of the two: Redis holds the other processes' requests, memory those Redis missed.
          if (local.allowed && (!global.allowed || global.remainingPoints < local.remainingPoints))
            decision = global;
        } catch (error) {
          this.markDown(error);
        }
      }
    }
    return {
      allowed: decision.allowed,
      limit,
      remaining: decision.allowed ? decision.remainingPoints : 0,
      resetSeconds: seconds(decision.msBeforeNext),
    };
  }

  private withTimeout<T>(promise: Promise<T>): Promise<T> {
    return within(promise, this.timeoutMs, () => {
      throw new RedisTimeout(this.timeoutMs);
    });
  }

  private markDown(error: unknown): void {
    if (this.redisDown) return;
    this.redisDown = true;
    this.lastProbe = Date.now();
    this.log.warn(
      { err: error, timeout_ms: this.timeoutMs },
      'Redis does not answer: rate limits are counted in this process alone until it does',
    );
  }

  private markUp(): void {
    if (!this.redisDown) return;
    this.redisDown = false;
    this.log.info({}, 'Redis answers again: rate limits are shared through it');
  }

  /** At most one background PING per PROBE_INTERVAL_MS while Redis is down; its answer brings Redis back. */
  private probe(): void {
    const redis = this.redis;
    if (!redis || this.probing || Date.now() - this.lastProbe < PROBE_INTERVAL_MS) return;
    this.probing = true;
    this.lastProbe = Date.now();
    const ping = redis.status === 'ready' ? redis.ping() : Promise.reject(new Error(`Redis ${redis.status}`));
    this.withTimeout(ping)
      .then(() => this.markUp())
      // Any failure of the PING is the answer "still down": the next probe tries again.
      .catch(() => {})
      .finally(() => {
        this.probing = false;
      });
  }
}

interface Outcome {
  allowed: boolean;
  remainingPoints: number;
  msBeforeNext: number;
}

/** A limiter's answer as a value: rate-limiter-flexible rejects with a RateLimiterRes past the limit. */
async function outcome(consumed: Promise<RateLimiterRes>): Promise<Outcome> {
  try {
    const res = await consumed;
    return { allowed: true, remainingPoints: res.remainingPoints, msBeforeNext: res.msBeforeNext };
  } catch (rejection) {
    if (rejection instanceof RateLimiterRes)
      return { allowed: false, remainingPoints: 0, msBeforeNext: rejection.msBeforeNext };
    throw rejection;
  }
}

function seconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
