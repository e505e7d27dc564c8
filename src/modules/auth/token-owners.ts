import { Redis } from 'ioredis';
import type { Db } from '../../db/connect.ts';
import type { Role } from '../../domain.ts';
import { findTokenOwner } from './auth.repository.ts';

/** A token's owner as every authenticated request needs it, times as epoch milliseconds. */
export interface CachedOwner {
  readonly tokenId: number;
  readonly tokenHash: string;
  readonly userId: number;
  readonly workspaceId: number;
  readonly role: Role;
  /** Revoked, or its user deactivated: the token authenticates nobody. */
  readonly dead: boolean;
  readonly expiresMs: number | null;
  /** When the token was last recorded as used; moved forward by the request that records it. */
  lastUsedMs: number;
}

interface Entry {
  owner: CachedOwner;
  at: number;
}

/** Where a change of a token or a user is told, after it commits, so that no process goes on trusting it. */
export interface AuthChanges {
  forgetToken(tokenId: number): Promise<void>;
  forgetUser(userId: number): Promise<void>;
}

/** However an invalidation might be lost, no owner is kept longer than this. */
export const TOKEN_OWNER_MAX_AGE_MS = 1000;
const MAX_ENTRIES = 10_000;

/** How this process learns that another one changed a token or a user. */
type Freshness =
  /** SQLite: `PRAGMA data_version` moves when any other connection (process, thread) commits. */
  | { kind: 'sqlite'; version: () => number }
  /** Redis: every process publishes what it changed, and each keeps owners only while it is subscribed. */
  | { kind: 'redis' }
  /** PostgreSQL without Redis: other processes cannot tell this one, so nothing is kept. */
  | { kind: 'none' };

/**
 * The owners of bearer tokens, read once and kept for at most a second, so that an authenticated request
 * does not pay a database round trip for its token. A change is seen at once:
 * - by this process: the services call `forgetUser` / `forgetToken` after their transaction commits;
 * - by the other processes on SQLite: the database's data version has moved, and every owner is read again;
 * - by the other processes with Redis: the change is published on `<REDIS_PREFIX>auth`, and each process
 *   forgets what it names when the message arrives (a millisecond or two on a LAN). While the subscription
 *   is not up, no owner is kept, and a resubscription forgets everything;
 * - on PostgreSQL without Redis nothing is kept (every request reads its token).
 * The one-second bound holds even if a message is lost (a publisher cut from Redis mid-change).
 */
export class TokenOwners implements AuthChanges {
  private readonly entries = new Map<number, Entry>();
  /** Moves on every forget: a read that began before it must not store what it read. */
  private generation = 0;
  private readonly freshness: Freshness;
  private lastVersion = -1;
  private subscribed = false;
  private readonly subscriber: Redis | undefined;

  constructor(
    private readonly db: Db,
    private readonly redis: Redis | undefined,
    private readonly channel: string,
    private readonly log: { warn(obj: object, msg: string): void },
  ) {
    if (db.raw.dialect === 'sqlite') {
      const statement = db.raw.sqlite.prepare('PRAGMA data_version').pluck();
      this.freshness = { kind: 'sqlite', version: () => statement.get() as number };
    } else if (redis) {
      this.freshness = { kind: 'redis' };
      this.subscriber = redis.duplicate({ enableOfflineQueue: true, lazyConnect: false });
      this.subscriber.on('error', () => {});
      this.subscriber.on('message', (_channel: string, message: string) => this.apply(message));
      this.subscriber.on('ready', () => {
        this.subscriber
          ?.subscribe(channel)
          .then(() => {
            this.forgetAll();
            this.subscribed = true;
          })
          .catch((error: unknown) => this.log.warn({ err: error }, 'could not subscribe to auth changes'));
      });
      const down = () => {
        this.subscribed = false;
        this.forgetAll();
      };
      this.subscriber.on('close', down);
      this.subscriber.on('end', down);
    } else {
      this.freshness = { kind: 'none' };
    }
  }

  /** The owner of token `tokenId`, or null when there is no such token. */
  async find(tokenId: number): Promise<CachedOwner | null> {
    const now = Date.now();
    if (this.caching()) {
      const entry = this.entries.get(tokenId);
      if (entry && now - entry.at < TOKEN_OWNER_MAX_AGE_MS) return entry.owner;
    }
    const generation = this.generation;
    const row = await findTokenOwner(this.db.kysely, tokenId);
    const owner: CachedOwner | null = row
      ? {
          tokenId: row.token_id,
          tokenHash: row.token_hash,
          userId: row.user_id,
          workspaceId: row.workspace_id,
          role: row.role,
          dead: Boolean(row.revoked_at || row.deactivated_at),
          expiresMs: row.expires_at ? Date.parse(row.expires_at) : null,
          lastUsedMs: row.last_used_at ? Date.parse(row.last_used_at) : 0,
        }
      : null;
    // Only a token that exists is kept: an id not issued yet may be issued the next moment. On SQLite, a commit
    // elsewhere during the read is caught by the next request's version check.
    if (owner && generation === this.generation && this.mayKeep()) {
      if (this.entries.size >= MAX_ENTRIES) this.entries.clear();
      this.entries.set(tokenId, { owner, at: now });
    }
    return owner;
  }

  /** After a commit that revoked the token. */
  async forgetToken(tokenId: number): Promise<void> {
    await this.changed(`t:${tokenId}`);
  }

  /** After a commit that changed the user (role, deactivation, password) or revoked their tokens. */
  async forgetUser(userId: number): Promise<void> {
    await this.changed(`u:${userId}`);
  }

  close(): void {
    this.subscribed = false;
    this.subscriber?.disconnect();
  }

  /** Whether owners may be kept right now; on SQLite, forgets them all if another connection has committed. */
  private caching(): boolean {
    switch (this.freshness.kind) {
      case 'none':
        return false;
      case 'redis':
        return this.subscribed;
      case 'sqlite': {
        const version = this.freshness.version();
        if (version !== this.lastVersion) {
          this.lastVersion = version;
          this.forgetAll();
        }
        return true;
      }
    }
  }

  private mayKeep(): boolean {
    return this.freshness.kind === 'sqlite' || (this.freshness.kind === 'redis' && this.subscribed);
  }

  private async changed(message: string): Promise<void> {
    this.apply(message);
    if (this.redis) await announceAuthChange(this.redis, this.channel, message, this.log);
  }

  private apply(message: string): void {
    this.generation += 1;
    const id = Number(message.slice(2));
    if (message.startsWith('t:')) this.entries.delete(id);
    else if (message.startsWith('u:')) {
      for (const [tokenId, entry] of this.entries)
        if (entry.owner.userId === id) this.entries.delete(tokenId);
    } else this.forgetAll();
  }

  private forgetAll(): void {
    this.generation += 1;
    this.entries.clear();
  }
}

/** The Redis channel of token and user changes. */
export function authChannel(redisPrefix: string): string {
  return `${redisPrefix}auth`;
}

/**
 * Tells every API process that a token (`t:<id>`) or a user (`u:<id>`) changed. The CLI calls it too. Should
 * Redis not take it, the processes drop what they kept within TOKEN_OWNER_MAX_AGE_MS all the same.
 */
export async function announceAuthChange(
  redis: Redis,
  channel: string,
  message: string,
  log: { warn(obj: object, msg: string): void },
): Promise<void> {
  try {
    await redis.publish(channel, message);
  } catch (error) {
    log.warn({ err: error }, 'could not publish an auth change: other processes see it within a second');
  }
}

/**
 * The CLI's side of AuthChanges: it keeps no owners, and only tells the running API processes. On SQLite they
 * see its commit through the data version; with Redis it publishes.
 */
export function announcer(redisUrl: string | undefined, channel: string): AuthChanges & { close(): void } {
  let redis: Redis | undefined;
  const log = { warn: (_obj: object, msg: string) => console.error(msg) };
  const tell = async (message: string) => {
    if (!redisUrl) return;
    redis ??= new Redis(redisUrl, { maxRetriesPerRequest: 1, connectTimeout: 2000 });
    await announceAuthChange(redis, channel, message, log);
  };
  return {
    forgetToken: (tokenId) => tell(`t:${tokenId}`),
    forgetUser: (userId) => tell(`u:${userId}`),
    close: () => redis?.disconnect(),
  };
}
