import { bootstrap, onStopSignal } from './bootstrap.ts';
import { Background } from './jobs/background.ts';
import { createProviders } from './providers/registry.ts';

/**
 * The background loops alone (src/jobs/background.ts), for scale-out: run as many as needed against one PostgreSQL database. SIGTERM or
 * SIGINT stops it after the message in hand and releases its unsent claims.
 */
async function main(): Promise<void> {
  const { config, db, log } = await bootstrap();
  const providers = createProviders(config, log);
  const background = new Background({ db, config, providers, log });
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await background.stop();
    for (const provider of Object.values(providers)) provider.close?.();
    await db.close();
    process.exit(0);
  };
  onStopSignal(() => void stop());
  background.start();
}

main().catch((error: unknown) => {
  console.error('Failed to start the worker:', error instanceof Error ? error.message : error);
  process.exit(1);
});
