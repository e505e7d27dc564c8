import type { AddressInfo } from 'node:net';
import type { TestApp } from './helpers.ts';

/** The live event stream's test client, shared by the tests that read it over HTTP. */

export interface Received {
  id: string;
  type: string;
  data: Record<string, unknown>;
}

/** A real SSE client over HTTP: the events received, whether the server ended the stream, and a way to leave. */
export async function openStream(base: string, token: string, lastEventId?: string) {
  const controller = new AbortController();
  const res = await fetch(`${base}/api/events/stream`, {
    headers: { authorization: `Bearer ${token}`, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
    signal: controller.signal,
  });
  const events: Received[] = [];
  const state = { ended: false };
  if (res.ok && res.body) {
    void (async () => {
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let buffer = '';
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          for (let at = buffer.indexOf('\n\n'); at >= 0; at = buffer.indexOf('\n\n')) {
            const block = buffer.slice(0, at);
            buffer = buffer.slice(at + 2);
            const event: Partial<Received> = {};
            for (const line of block.split('\n')) {
              if (line.startsWith('id: ')) event.id = line.slice(4);
              else if (line.startsWith('event: ')) event.type = line.slice(7);
              else if (line.startsWith('data: '))
                event.data = JSON.parse(line.slice(6)) as Record<string, unknown>;
            }
            if (event.type) events.push(event as Received);
          }
        }
      } catch {
        // aborted by the test
      }
      state.ended = true;
    })();
  }
  return { status: res.status, headers: res.headers, events, state, close: () => controller.abort() };
}

export async function listen(t: TestApp): Promise<string> {
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
}
