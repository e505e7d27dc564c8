import { AppError } from '../errors.ts';

interface Waiter {
  grant: (release: () => void) => void;
  fail: (error: Error) => void;
  timer: NodeJS.Timeout;
}

/**
 * A shared resource (the PostgreSQL bulk pool's connections) shared per workspace: at most `capacity` held in
 * all, at most `perKey` by one workspace, so one workspace's share is well below the whole. A request that
 * finds no room waits in its workspace's queue instead of failing; when a slot frees, the workspaces waiting
 * take turns (round robin), so a workspace queueing many requests cannot push another's first one back. A
 * waiter not served within `waitMs` is refused with 503 and Retry-After. In memory, per process.
 */
export class FairGate {
  private total = 0;
  private readonly held = new Map<number, number>();
  /** Waiting requests per workspace; the Map's order is the round robin (a served key moves to the end). */
  private readonly queues = new Map<number, Waiter[]>();

  constructor(
    private readonly capacity: number,
    private readonly perKey: number,
    private readonly waitMs: number,
    private readonly what: string,
  ) {}

  /** Waits for a slot for `key`; call the result once to give it back. */
  acquire(key: number): Promise<() => void> {
    if (this.queues.size === 0 && this.hasRoom(key)) return Promise.resolve(this.take(key));
    return new Promise((grant, fail) => {
      const waiter: Waiter = {
        grant,
        fail,
        timer: setTimeout(() => {
          const queue = this.queues.get(key);
          const at = queue?.indexOf(waiter) ?? -1;
          if (at < 0) return;
          queue!.splice(at, 1);
          if (queue!.length === 0) this.queues.delete(key);
          fail(
            new AppError(
              'service_unavailable',
              `${this.what} are all in use (${this.capacity}, at most ${this.perKey} per workspace); waited ${Math.round(this.waitMs / 1000)} s: try again shortly.`,
              undefined,
              { 'retry-after': '10' },
            ),
          );
        }, this.waitMs),
      };
      const queue = this.queues.get(key);
      if (queue) queue.push(waiter);
      else this.queues.set(key, [waiter]);
      this.pump();
    });
  }

  /** Slots held now, in all and by `key` (tests, metrics). */
  inUse(key?: number): number {
    return key === undefined ? this.total : (this.held.get(key) ?? 0);
  }

  private hasRoom(key: number): boolean {
    return this.total < this.capacity && (this.held.get(key) ?? 0) < this.perKey;
  }

  private take(key: number): () => void {
    this.total += 1;
    this.held.set(key, (this.held.get(key) ?? 0) + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.total -= 1;
      const left = (this.held.get(key) ?? 1) - 1;
      if (left > 0) this.held.set(key, left);
      else this.held.delete(key);
      this.pump();
    };
  }

  /** Serves waiting workspaces in turn while there is room. */
  private pump(): void {
    let served = true;
    while (served && this.total < this.capacity) {
      served = false;
      for (const [key, queue] of this.queues) {
        if (!this.hasRoom(key)) continue;
        const waiter = queue.shift()!;
        this.queues.delete(key);
        if (queue.length > 0) this.queues.set(key, queue);
        clearTimeout(waiter.timer);
        waiter.grant(this.take(key));
        served = true;
        break;
      }
    }
  }
}
