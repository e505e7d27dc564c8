import { bootstrap, onStopSignal } from './bootstrap.ts';
import { Background } from './jobs/background.ts';
import { within } from './lib/time-limit.ts';
import { createProviders } from './providers/registry.ts';

/**
 * The background loops alone (src/jobs/background.ts), for scale-out: run as many as needed against one
 * PostgreSQL database. SIGTERM or SIGINT stops it after the message in hand and releases its unsent claims,
 * within SHUTDOWN_TIMEOUT_MS.
 */
async function main(): Promise<void> {
  const { config, db, log } = await bootstrap();
  const providers = createProviders(config, log);
  const background = new Background({ db, config, providers, log });
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    const { shutdownTimeoutMs } = config;
    log.info({ signal }, 'worker shutting down');
    // Whatever is still pending at SHUTDOWN_TIMEOUT_MS, the process ends then.
    setTimeout(() => {
      log.error('worker shutdown did not finish in time; exiting');
      process.exit(1);
    }, shutdownTimeoutMs).unref();
    const lastBy = Date.now() + shutdownTimeoutMs - Math.min(200, shutdownTimeoutMs * 0.05);
    await within(background.stop(), lastBy - Date.now() - 100, () =>
      log.warn('the loops did not stop in time'),
    );
    for (const provider of Object.values(providers)) provider.close?.();
    await within(db.close(), lastBy - Date.now(), () => undefined);
    process.exit(0);
  };
  onStopSignal((signal) => void stop(signal));
  background.start();
}

main().catch((error: unknown) => {
  console.error('Failed to start the worker:', error instanceof Error ? error.message : error);
  process.exit(1);
});
