import { createServer, type Server, type Socket, connect } from 'node:net';

export type FaultMode = 'pass' | 'stall' | 'reset';

/**
 * A TCP proxy on loopback that the tests control, for fault injection between the service and PostgreSQL or
 * Redis:
 * - `pass`: bytes flow both ways;
 * - `stall`: connections are accepted (new ones too) but no byte goes either way, as a server that hangs;
 * - `reset`: every open connection is reset and new ones are reset at once, as a server that went away.
 * `pass` again restores the service for new connections (stalled ones resume).
 */
export class FaultProxy {
  private mode: FaultMode = 'pass';
  private readonly pairs = new Set<{ client: Socket; upstream: Socket }>();
  private server: Server | undefined;
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  async start(): Promise<this> {
    this.server = createServer((client) => this.accept(client));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
    return this;
  }

  /** The target URL rewritten to go through the proxy (host and port replaced). */
  url(targetUrl: string): string {
    const u = new URL(targetUrl);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  set(mode: FaultMode): void {
    this.mode = mode;
    for (const pair of this.pairs) {
      if (mode === 'reset') {
        pair.client.resetAndDestroy();
        pair.upstream.destroy();
      } else if (mode === 'stall') {
        pair.client.pause();
        pair.upstream.pause();
      } else {
        pair.client.resume();
        pair.upstream.resume();
      }
    }
  }

  get connections(): number {
    return this.pairs.size;
  }

  async close(): Promise<void> {
    for (const pair of this.pairs) {
      pair.client.destroy();
      pair.upstream.destroy();
    }
    this.pairs.clear();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private accept(client: Socket): void {
    if (this.mode === 'reset') {
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(this.targetPort, this.targetHost);
    const pair = { client, upstream };
    this.pairs.add(pair);
    const drop = () => {
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
    if (this.mode === 'stall') {
      client.pause();
      upstream.pause();
    }
  }
}
