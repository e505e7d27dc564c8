import { buildApp } from './app.ts';
import { bootstrap, onStopSignal } from './bootstrap.ts';
import { Background } from './jobs/background.ts';
import { within } from './lib/time-limit.ts';
import { createProviders } from './providers/registry.ts';

/** Resolves with `promise`, or with 'late' once `deadline` (a Date.now() value) has passed. */
function by<T>(promise: Promise<T>, deadline: number): Promise<T | 'late'> {
  return within(promise, deadline - Date.now(), () => 'late' as const);
}

/**
 * Starts the API on PORT/HOST with migrations applied, and the delivery worker in the same process unless
 * WORKER_IN_PROCESS=false. SIGTERM/SIGINT, in order: stop accepting connections; let requests in flight
 * finish while the workers stop (their unsent claims are released for other workers); close the database
 * only then, so that no handler runs on a closed pool. Requests still running after SHUTDOWN_TIMEOUT_MS
 * less a moment (an export to a client that does not read, say) have their connections closed, and the
 * process exits within SHUTDOWN_TIMEOUT_MS whatever is still pending. GET /api/readyz answers 503 from the
 * signal on; with SHUTDOWN_DRAIN_MS set, the listener stays open (and everything else is served) that long first,
 * and SHUTDOWN_TIMEOUT_MS counts from the end of the drain.
 */
async function main(): Promise<void> {
  const { config, db, log } = await bootstrap();
  const providers = createProviders(config, log);
  const app = await buildApp({ config, db, providers, loggerInstance: log });
  // The background loops in this process (worker.ts runs the same loops alone).
  const background = config.delivery.inProcess ? new Background({ db, config, providers, log }) : undefined;

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.shuttingDown = true;
    if (config.shutdownDrainMs > 0) {
      // The drain: readyz answers 503 so that load balancers take this process out, while every other request is
      // still served on the open listener; then the shutdown goes on as before.
      app.log.info({ signal, drain_ms: config.shutdownDrainMs }, 'draining: readyz answers 503');
      await new Promise((resolve) => setTimeout(resolve, config.shutdownDrainMs));
    }
    const started = Date.now();
    const { shutdownTimeoutMs } = config;
    // The last resort: nothing below may keep the process alive past the limit.
    setTimeout(() => {
      app.log.error('shutdown did not finish in time; exiting');
      process.exit(1);
    }, shutdownTimeoutMs).unref();
    // Requests get the limit less what closing their connections, the workers and the database may take.
    const requestsBy = started + shutdownTimeoutMs - Math.min(2000, shutdownTimeoutMs * 0.3);
    const lastBy = started + shutdownTimeoutMs - Math.min(200, shutdownTimeoutMs * 0.05);
    app.log.info({ signal }, 'shutting down');
    const closed = app.close();
    // close() closes the connections idle at that moment; a keep-alive connection whose request ends later
    // would otherwise stay open (and keep close() waiting) until its client or the keep-alive timeout ends it.
    const idle = setInterval(() => app.server.closeIdleConnections(), 50);
    closed.finally(() => clearInterval(idle)).catch(() => {}); // close()'s error is awaited (and logged) below
    const workers = background ? background.stop() : Promise.resolve();
    if ((await by(closed, requestsBy)) === 'late') {
      app.log.warn('requests still running at SHUTDOWN_TIMEOUT_MS; closing their connections');
      app.server.closeAllConnections();
      await by(closed, Math.min(lastBy, Date.now() + 1000));
    }
    // Handlers whose clients went away are not waited for by close(): they still use the database.
    if ((await by(app.handlersDone(), Math.max(requestsBy, Math.min(lastBy, Date.now() + 500)))) === 'late') {
      app.log.warn('request handlers still running at SHUTDOWN_TIMEOUT_MS');
    }
    if ((await by(workers, lastBy)) === 'late')
      app.log.warn('the workers did not stop by SHUTDOWN_TIMEOUT_MS');
    for (const provider of Object.values(providers)) provider.close?.();
    await by(db.close(), lastBy);
    process.exit(0);
  };
  onStopSignal((signal) => void stop(signal));

  await app.listen({ port: config.port, host: config.host });
  background?.start();
  app.log.info({ database: db.dialect }, `Campaign Engagement Service ready; API reference at /api/docs`);
}

main().catch((error: unknown) => {
  console.error('Failed to start:', error instanceof Error ? error.message : error);
  process.exit(1);
});
