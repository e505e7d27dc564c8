import type { Redis } from 'ioredis';
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
} from 'rate-limiter-flexible';
import type { Config } from '../config.ts';

export const buckets = ['public', 'authenticated', 'auth', 'otp', 'callback', 'failedAuth'] as const;
export type Bucket = (typeof buckets)[number];

export interface RateLimitState {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
}

const WINDOW_SECONDS = 60;

/**
 * The four buckets of the contract (and one for providers' delivery callbacks), each a fixed one-minute window per key. Counters live in memory, or in
 * Redis when a client is given so that every API process enforces the same limit. rate-limiter-flexible
 * keeps the counting atomic (a Lua INCR + PEXPIRE in Redis); should Redis fail, an in-memory limiter
 * takes over for that request rather than letting everything through or failing it.
 */
export class RateLimits {
  private readonly limiters: Record<Bucket, RateLimiterAbstract>;

  constructor(config: Pick<Config, 'rateLimits'>, redis?: Redis, keyPrefix = 'ces:rl') {
    const make = (bucket: Bucket): RateLimiterAbstract => {
      const points = config.rateLimits[bucket];
      const memory = new RateLimiterMemory({
        points,
        duration: WINDOW_SECONDS,
        keyPrefix: `${keyPrefix}:${bucket}`,
      });
      if (!redis) return memory;
      return new RateLimiterRedis({
        storeClient: redis,
        points,
        duration: WINDOW_SECONDS,
        keyPrefix: `${keyPrefix}:${bucket}`,
        insuranceLimiter: memory,
      });
    };
    this.limiters = {
      public: make('public'),
      authenticated: make('authenticated'),
      auth: make('auth'),
      otp: make('otp'),
      callback: make('callback'),
      failedAuth: make('failedAuth'),
    };
  }

  async consume(bucket: Bucket, key: string): Promise<RateLimitState> {
    const limiter = this.limiters[bucket];
    const limit = limiter.points;
    try {
      const res = await limiter.consume(key);
      return {
        allowed: true,
        limit,
        remaining: res.remainingPoints,
        resetSeconds: seconds(res.msBeforeNext),
      };
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) {
        return { allowed: false, limit, remaining: 0, resetSeconds: seconds(rejection.msBeforeNext) };
      }
      throw rejection;
    }
  }
}

function seconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
