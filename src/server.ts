import { buildApp } from './app.ts';
import { bootstrap } from './bootstrap.ts';
import { startWebhookDelivery } from './jobs/webhook-delivery.ts';
import { DeliveryWorker } from './jobs/delivery-worker.ts';
import { createProviders } from './providers/registry.ts';

/**
 * Starts the API on PORT/HOST with migrations applied, and the delivery worker in the same process unless
 * WORKER_IN_PROCESS=false. SIGTERM/SIGINT: stop accepting, drain requests, stop the worker (its unsent
 * claims are released for other workers), close the database.
 */
async function main(): Promise<void> {
  const { config, db, log } = await bootstrap();
  const providers = createProviders(config, log);
  const app = await buildApp({ config, db, providers });
  const worker = config.delivery.inProcess ? new DeliveryWorker({ db, config, providers, log }) : undefined;
  // In-process webhook delivery (worker.ts runs the same loops alone).
  const webhookWorker = config.delivery.inProcess
    ? startWebhookDelivery({ db: db.kysely, config, log: app.log })
    : undefined;

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down');
    await app.close();
    await webhookWorker?.stop();
    await worker?.stop();
    for (const provider of Object.values(providers)) provider.close?.();
    await db.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));

  await app.listen({ port: config.port, host: config.host });
  worker?.start();
  app.log.info({ database: db.dialect }, `Campaign Engagement Service ready; API reference at /api/docs`);
}

main().catch((error: unknown) => {
  console.error('Failed to start:', error instanceof Error ? error.message : error);
  process.exit(1);
});
