import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { Db } from '../db/connect.ts';
import type { Providers } from '../providers/provider.ts';
import { DeliveryWorker } from './delivery-worker.ts';
import { startWebhookDelivery, type WebhookDeliveryWorker } from './webhook-delivery.ts';

/**
 * Every background loop of a process, in one place for server.ts (in-process workers) and worker.ts (the
 * worker process): message delivery and its chores, and webhook delivery. A new loop is added here only.
 */
export class Background {
  readonly delivery: DeliveryWorker;
  private webhooks: WebhookDeliveryWorker | undefined;

  constructor(
    private readonly deps: { db: Db; config: Readonly<Config>; providers: Providers; log: FastifyBaseLogger },
  ) {
    this.delivery = new DeliveryWorker(deps);
  }

  start(): void {
    const { db, config, log } = this.deps;
    this.webhooks ??= startWebhookDelivery({ db: db.kysely, config, log });
    this.delivery.start();
  }

  /** Stops every loop; each hands back (releases) the work it has claimed but not done. */
  async stop(): Promise<void> {
    await Promise.all([this.webhooks?.stop(), this.delivery.stop()]);
  }
}
