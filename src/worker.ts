import { bootstrap } from './bootstrap.ts';
import { DeliveryWorker } from './jobs/delivery-worker.ts';
import { startWebhookDelivery } from './jobs/webhook-delivery.ts';
import { createProviders } from './providers/registry.ts';

/**
 * The delivery loops alone (messages and webhook deliveries), for scale-out: run as many as needed against one PostgreSQL database. SIGTERM or
 * SIGINT stops it after the message in hand and releases its unsent claims.
 */
async function main(): Promise<void> {
  const { config, db, log } = await bootstrap();
  const providers = createProviders(config, log);
  const worker = new DeliveryWorker({ db, config, providers, log });
  const webhookWorker = startWebhookDelivery({ db: db.kysely, config, log });
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await worker.stop();
    await webhookWorker.stop();
    for (const provider of Object.values(providers)) provider.close?.();
    await db.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
  worker.start();
}

main().catch((error: unknown) => {
  console.error('Failed to start the worker:', error instanceof Error ? error.message : error);
  process.exit(1);
});
