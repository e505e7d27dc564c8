import { buildApp } from './app.ts';
import { ConfigError, defaultKeyFile, loadConfig } from './config.ts';
import { connect } from './db/connect.ts';
import { migrateToLatest } from './db/migrate.ts';
import { startWebhookDelivery } from './jobs/webhook-delivery.ts';

/** Starts the API on PORT/HOST with migrations applied; SIGTERM/SIGINT stop accepting, drain, and close. */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env, { keyFile: defaultKeyFile() });
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(1);
    }
    throw error;
  }
  const db = connect(config.databaseUrl);
  await migrateToLatest(db.kysely);
  const app = await buildApp({ config, db });
  // In-process webhook delivery (a worker.ts can make the same call to run it alone).
  const webhookWorker = startWebhookDelivery({ db: db.kysely, config, log: app.log });

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down');
    await app.close();
    await webhookWorker.stop();
    await db.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));

  await app.listen({ port: config.port, host: config.host });
  app.log.info({ database: db.dialect }, `Campaign Engagement Service ready; API reference at /api/docs`);
}

main().catch((error: unknown) => {
  console.error('Failed to start:', error instanceof Error ? error.message : error);
  process.exit(1);
});
