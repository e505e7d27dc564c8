import pg from 'pg';

/** How long to wait before listening again after the connection was lost (doubling up to the last). */
const RECONNECT_MS = [250, 500, 1000, 2000, 5000];

/**
 * A PostgreSQL `LISTEN` on a connection of its own (a pooled one would be handed to queries): `onPayload` gets
 * each notification's payload in commit order, `onConnect` runs each time the listen starts (first and after
 * every reconnection: notifications sent while no connection listened are lost, so the caller catches up then).
 * The connection is opened again whenever it is lost. `close` ends it.
 */
export function listen(
  databaseUrl: string,
  channel: string,
  onPayload: (payload: string) => void,
  onConnect: () => void,
): { close(): Promise<void> } {
  let client: pg.Client | undefined;
  let closed = false;
  let attempt = 0;
  let timer: NodeJS.Timeout | undefined;

  const again = () => {
    if (closed || timer) return;
    const wait = RECONNECT_MS[Math.min(attempt, RECONNECT_MS.length - 1)]!;
    attempt += 1;
    timer = setTimeout(() => {
      timer = undefined;
      void open();
    }, wait);
    timer.unref();
  };

  const open = async () => {
    const next = new pg.Client({
      connectionString: databaseUrl,
      keepAlive: true,
      connectionTimeoutMillis: 5000,
    });
    client = next;
    // Only the current connection's loss opens another (a late 'end' of an old one must not make two listens).
    const lost = () => {
      if (client !== next) return;
      client = undefined;
      void next.end().catch(() => {});
      again();
    };
    next.on('error', lost);
    next.on('end', lost);
    next.on('notification', (message) => {
      if (message.channel === channel && message.payload !== undefined) onPayload(message.payload);
    });
    try {
      await next.connect();
      await next.query(`LISTEN "${channel.replace(/"/g, '')}"`);
      if (closed) {
        await next.end().catch(() => {});
        return;
      }
      attempt = 0;
      onConnect();
    } catch {
      lost();
    }
  };

  void open();
  return {
    async close() {
      closed = true;
      clearTimeout(timer);
      const current = client;
      client = undefined;
      await current?.end().catch(() => {});
    },
  };
}
