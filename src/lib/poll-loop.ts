import type { FastifyBaseLogger } from 'fastify';

/**
 * A background loop of a worker (voter imports, webhook delivery, bulk tagging, survey runs): runs `round` again
 * at once while it finds work (with a turn for other callbacks between two), else every `pollMs`, or at once
 * when woken. A round that throws is logged and the loop goes on, waiting longer after each failure in a row
 * (twice as long each time, at most 30 polls: a database that is down is not hammered). `stop` waits for the
 * round under way, which is asked `stopping()` between its steps.
 */
export class PollLoop {
  private running: Promise<void> | undefined;
  private stopped = true;
  private wakeUp: (() => void) | undefined;

  constructor(
    private readonly deps: {
      name: string;
      round: (stopping: () => boolean) => Promise<boolean>;
      log: Pick<FastifyBaseLogger, 'error'>;
      pollMs: number;
    },
  ) {}

  start(): void {
    if (this.running) return;
    this.stopped = false;
    this.running = this.loop();
  }

  /** stop() was called on a running loop: the round under way should end at its next step. */
  get stopping(): boolean {
    return this.stopped && this.running !== undefined;
  }

  /** Ends the wait for the next poll (work was queued in this process, a slot was freed). */
  wake(): void {
    this.wakeUp?.();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wakeUp?.();
    await this.running;
    this.running = undefined;
  }

  private async loop(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      let busy = false;
      try {
        busy = await this.deps.round(() => this.stopped);
        failures = 0;
      } catch (error) {
        failures += 1;
        this.deps.log.error({ err: error }, `${this.deps.name} round failed`);
      }
      if (this.stopped) break;
      if (busy) {
        await new Promise((resolve) => setImmediate(resolve));
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, this.deps.pollMs * Math.min(2 ** failures, 30));
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.wakeUp = done;
      });
      this.wakeUp = undefined;
    }
  }
}
