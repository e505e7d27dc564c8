import type { FastifyBaseLogger } from 'fastify';
import type { Db } from './connect.ts';

/** How often the background check asks a database that failed whether it answers again. */
const CHECK_EVERY_MS = 500;

/**
 * What the API knows of the database between requests. Once a request finds that the database does not answer
 * (a statement or pool timeout, a refused or reset connection: `isDatabaseUnavailable`), every request that
 * needs it is answered 503 with Retry-After at once, instead of each waiting out a timeout of its own (a stalled
 * PostgreSQL held every request for its own 10 s statement timeout although the health check saw the stall in
 * 2 s), until a background check, at once and then every CHECK_EVERY_MS, finds it answering again. PostgreSQL
 * only: the embedded SQLite database has no server to lose (a locked file is a wait of its own).
 */
export class DatabaseOutage {
  private down = false;
  private checking = false;

  constructor(
    private readonly db: Db,
    private readonly log: FastifyBaseLogger,
  ) {}

  /** True while the database is known not to answer. */
  get isDown(): boolean {
    return this.down;
  }

  /** A request found the database not answering: refuse the next ones at once until it answers again. */
  report(): void {
    if (this.db.dialect !== 'postgres' || this.down) return;
    this.down = true;
    this.log.warn('the database does not answer: requests that need it answer 503 until it does');
    void this.check();
  }

  private async check(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      while (this.down) {
        try {
          await this.db.ping();
          this.down = false;
          this.log.info('the database answers again');
        } catch {
          await new Promise((resolve) => setTimeout(resolve, CHECK_EVERY_MS).unref());
        }
      }
    } finally {
      this.checking = false;
    }
  }

  /** Stops the background check (shutdown). */
  close(): void {
    this.down = false;
  }
}
