import type { FastifyInstance } from 'fastify';

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Resolves once no route handler is running. `close()` resolves when the last connection has closed,
     * but a handler whose client went away keeps running (and using the database) after that: shutdown
     * waits for this too before it closes the database.
     */
    handlersDone(): Promise<void>;
  }
}

/** Counts the route handlers running (see handlersDone). Install before the routes are registered. */
export function trackHandlers(app: FastifyInstance): void {
  let running = 0;
  let waiters: (() => void)[] = [];
  const finished = () => {
    running -= 1;
    if (running > 0) return;
    const done = waiters;
    waiters = [];
    for (const resolve of done) resolve();
  };
  app.decorate('handlersDone', () =>
    running === 0 ? Promise.resolve() : new Promise<void>((resolve) => waiters.push(resolve)),
  );
  app.addHook('onRoute', (route) => {
    const handler = route.handler;
    route.handler = function (this: FastifyInstance, ...args: Parameters<typeof handler>) {
      const result: unknown = handler.apply(this, args);
      if (!(result instanceof Promise)) return result;
      running += 1;
      return result.finally(finished);
    } as typeof handler;
  });
}
