import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { isDatabaseUnavailable } from '../../db/errors.ts';
import { AppError } from '../../errors.ts';
import { authOf, type AuthContext } from '../../http/guard.ts';
import type { LiveEventRow } from '../../db/schema.ts';
import { type EventHub, type Listener, liveEventTypes, RESUME_LIMIT } from './live.ts';

/** A comment line this often keeps proxies from closing a quiet stream. */
const HEARTBEAT_MS = 15_000;
/** How often a stream checks that its token still works (logout, revocation, deactivation end it). */
const TOKEN_CHECK_MS = 5_000;

/** What a stream shares with the others of the process. */
interface Streams {
  hub: EventHub;
  authenticate: (authorization: string | undefined) => Promise<AuthContext | null>;
  bufferBytes: number;
  /** Open streams by user. */
  open: Map<number, number>;
  /** Ends each open stream (at shutdown). */
  enders: Set<() => void>;
}

/**
 * Takes the connection over and streams the workspace's events the caller may see, after `after`, until the
 * client goes, its token stops working, it leaves too much unread, or the process shuts down.
 */
async function streamEvents(
  request: FastifyRequest,
  reply: FastifyReply,
  { hub, authenticate, bufferBytes, open, enders }: Streams,
  auth: AuthContext,
  after: number | undefined,
): Promise<void> {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, {
    ...(reply.getHeaders() as Record<string, string>),
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  raw.write('retry: 3000\n\n');
  let ended = false;
  // Never buffered without bound: a client that leaves bufferBytes unread is closed, and resumes with
  // Last-Event-ID (the console's reader does).
  const write = (text: string) => {
    if (ended) return;
    raw.write(text);
    if (raw.writableLength > bufferBytes) {
      request.log.warn({ buffered: raw.writableLength }, 'event stream: the client does not read; closed');
      end(true);
    }
  };
  const listener: Listener = {
    workspaceId: auth.workspaceId,
    viewer: { userId: auth.userId, role: auth.role },
    send: (event: LiveEventRow) => write(`id: ${event.id}\nevent: ${event.type}\ndata: ${event.data}\n\n`),
  };
  const heartbeat = setInterval(() => write(': keep-alive\n\n'), HEARTBEAT_MS);
  const check = setInterval(() => {
    authenticate(request.headers.authorization)
      .then((still) => {
        if (!still) end();
        // The role is read again: a demotion narrows an open stream within TOKEN_CHECK_MS.
        else listener.viewer = { userId: still.userId, role: still.role };
      })
      .catch((error: unknown) => {
        // The database is away: keep the stream and check again later. Anything else ends it, logged.
        if (isDatabaseUnavailable(error as { code?: unknown })) return;
        request.log.error({ err: error }, 'event stream: the token check failed');
        end();
      });
  }, TOKEN_CHECK_MS);
  const end = (stuck = false) => {
    if (ended) return;
    ended = true;
    clearInterval(heartbeat);
    clearInterval(check);
    hub.remove(listener);
    enders.delete(end);
    const left = (open.get(auth.userId) ?? 1) - 1;
    if (left > 0) open.set(auth.userId, left);
    else open.delete(auth.userId);
    // A client that does not read would never take the end either: its socket is dropped with what waits.
    if (stuck) raw.destroy();
    else raw.end();
  };
  enders.add(end);
  request.raw.on('close', () => end());
  raw.on('error', () => end());
  try {
    await hub.add(listener, after);
  } catch {
    end();
  }
}

/**
 * `GET /api/events/stream`: Server-Sent Events of the workspace's events that the caller may see, each with its
 * `id`; `Last-Event-ID` resumes after it (from the workspace's last 1,000). At most EVENT_STREAMS_PER_USER open
 * streams a user in this process.
 */
export const eventsRoutes: FastifyPluginAsyncTypebox<{
  hub: EventHub;
  authenticate: (authorization: string | undefined) => Promise<AuthContext | null>;
  perUser: number;
  /** EVENT_STREAM_BUFFER_KB: what a client may leave unread before its stream is closed. */
  bufferBytes: number;
}> = async (app, { hub, authenticate, perUser, bufferBytes }) => {
  const open = new Map<number, number>();
  const enders = new Set<() => void>();
  app.addHook('preClose', async () => {
    for (const end of [...enders]) end();
    hub.close();
  });

  app.get(
    '/events/stream',
    {
      config: { permission: 'authenticated' },
      schema: {
        tags: ['Conversations'],
        summary: 'Live events (Server-Sent Events)',
        description:
          `A \`text/event-stream\` of the workspace's events the caller may see: ${liveEventTypes.join(', ')} ` +
          "(a volunteer: only their conversations' events). Each event has an `id`, an `event` (its type) and `data` " +
          `(JSON, as webhooks carry it). \`Last-Event-ID\` resumes after that id, from the workspace's last ${RESUME_LIMIT}. ` +
          'A comment line every 15 s keeps it open; it ends when the token stops working (logout, revocation). At most ' +
          'EVENT_STREAMS_PER_USER (5) open streams a user; one more is 429. A client that leaves EVENT_STREAM_BUFFER_KB (256) ' +
          "unread is disconnected and resumes with Last-Event-ID. The caller's role is read again every 5 s.",
        headers: Type.Object({
          'last-event-id': Type.Optional(
            Type.String({ maxLength: 20, description: 'The last event id received.' }),
          ),
        }),
        produces: ['text/event-stream'],
        response: {
          200: {
            description: 'The stream.',
            content: { 'text/event-stream': { schema: { type: 'string' } } },
          },
        },
      },
    },
    async (request, reply) => {
      const auth = authOf(request);
      if ((open.get(auth.userId) ?? 0) >= perUser) {
        throw new AppError(
          'rate_limit_exceeded',
          `You have ${perUser} event streams open, the most a user may: close one (or reuse it) first.`,
        );
      }
      const header = request.headers['last-event-id'];
      const after =
        typeof header === 'string' && /^\d{1,15}$/.test(header.trim()) ? Number(header) : undefined;
      open.set(auth.userId, (open.get(auth.userId) ?? 0) + 1);
      await streamEvents(request, reply, { hub, authenticate, bufferBytes, open, enders }, auth, after);
    },
  );
};
