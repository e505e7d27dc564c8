import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { WebhookDeliveryWorker } from '../src/jobs/webhook-delivery.ts';
import type { Resolver } from '../src/modules/webhooks/webhooks.ssrf.ts';
import type { TestApp } from './helpers.ts';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** TCP connections accepted: stays 0 when a delivery was refused before any socket connected. */
  connections: number;
  close(): Promise<void>;
}

/**
 * A real HTTP receiver on loopback. `answer(n)` gives the status of the n-th request (1-based) and may set
 * headers on the response; default 200.
 */
export async function startReceiver(
  answer: (n: number, res: ServerResponse) => number = () => 200,
): Promise<Receiver> {
  const received: Received[] = [];
  const state = { connections: 0 };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      received.push({ headers: req.headers, body, json });
      res.statusCode = answer(received.length, res);
      res.end('ok');
    });
  });
  server.on('connection', () => {
    state.connections += 1;
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    port,
    received,
    get connections() {
      return state.connections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const silent = pino({ level: 'silent' });

/** A delivery worker on the test app's database and settings, serving only the given workspaces. */
export function workerFor(
  t: TestApp,
  workspaceIds: number[],
  options: { allowPrivateUrls?: boolean; resolver?: Resolver } = {},
): WebhookDeliveryWorker {
  return new WebhookDeliveryWorker({
    db: t.db.kysely,
    config: {
      appKey: t.config.appKey,
      webhooks: {
        ...t.config.webhooks,
        ...(options.allowPrivateUrls !== undefined ? { allowPrivateUrls: options.allowPrivateUrls } : {}),
      },
    },
    log: silent,
    workspaceIds,
    ...(options.resolver ? { resolver: options.resolver } : {}),
  });
}

/** A resolver that answers from a table (and fails for anything else): DNS the tests control. */
export function tableResolver(table: Record<string, string[] | (() => string[])>): Resolver {
  return async (hostname) => {
    const entry = table[hostname];
    if (!entry) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    const addresses = typeof entry === 'function' ? entry() : entry;
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}

/** Waits until `condition` holds, checking every 20 ms, failing after `timeoutMs` (no timing is asserted). */
export async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const start = Date.now();
  while (!(await condition())) {
    if (Date.now() - start > timeoutMs) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
