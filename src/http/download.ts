import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { within } from '../lib/time-limit.ts';

/** A file to send as an attachment, produced chunk by chunk. */
export interface Download {
  contentType: string;
  filename: string;
  /**
   * The bytes. A chunk belongs to the sender only until it asks for the next one: a producer may reuse or
   * hand back a chunk's memory then (sendDownload asks for the next chunk once the socket has taken the
   * last one).
   */
  body: AsyncIterator<Uint8Array> & AsyncIterable<Uint8Array>;
}

/** Writes a chunk and resolves once the socket has taken it; rejects if the response closes first. */
function written(res: ServerResponse, chunk: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    if (res.destroyed) {
      reject(new Error('the response was closed'));
      return;
    }
    const onClose = () => reject(new Error('the response was closed'));
    res.once('close', onClose);
    res.write(chunk, (error) => {
      res.off('close', onClose);
      if (error) reject(error);
      else resolve();
    });
  });
}

/** `step`, or a rejection (code ETIMEDOUT) when it has not settled within `ms`. */
function inTime<T>(step: Promise<T>, ms: number, what: string): Promise<T> {
  return within(step, ms, () => {
    throw Object.assign(new Error(`the download made no progress for ${ms} ms: ${what}`), {
      code: 'ETIMEDOUT',
    });
  });
}

/**
 * Sends `file` with status 200 as an attachment, one chunk at a time: the next chunk is asked for once the
 * socket has taken the one before (its write callback), so a slow client slows the producer and no chunk
 * is still being written when its producer gets it back. An error before the first chunk goes through the
 * usual error handling; after it the headers are out, so the error is logged and the connection closed
 * (the client sees a cut download). A client that goes away ends the body (its `return` runs).
 *
 * A download that makes no progress for `idleTimeoutMs` (a client that stopped reading, a producer that
 * waits on a database that does not answer) is ended the same way, so that it holds nothing (a database
 * connection, worker threads, a chunk) longer than that; before the first chunk it answers 503.
 */
export async function sendDownload(
  request: FastifyRequest,
  reply: FastifyReply,
  file: Download,
  idleTimeoutMs: number,
): Promise<void> {
  const body = file.body;
  let first: IteratorResult<Uint8Array>;
  try {
    first = await inTime(body.next(), idleTimeoutMs, 'waiting for the first bytes');
  } catch (error) {
    void body.return?.(undefined).catch(() => {}); // closing the producer after a failure: the first error is thrown
    throw error;
  }
  reply
    .header('content-type', file.contentType)
    .header('content-disposition', `attachment; filename="${file.filename}"`)
    .header('cache-control', 'no-store')
    .hijack();
  const res = reply.raw;
  res.writeHead(200, reply.getHeaders() as OutgoingHttpHeaders);
  let stalled = false;
  try {
    for (
      let next = first;
      !next.done;
      next = await inTime(body.next(), idleTimeoutMs, 'waiting for the next bytes')
    ) {
      await inTime(written(res, next.value), idleTimeoutMs, 'the client is not reading');
    }
    res.end();
  } catch (error) {
    stalled = (error as { code?: string }).code === 'ETIMEDOUT';
    if (stalled) request.log.warn({ err: error }, 'the download was ended: no progress');
    else if (!res.destroyed) request.log.error({ err: error }, 'the download stopped part-way');
    res.destroy();
  } finally {
    // A producer stuck in a call (a database that does not answer) cannot run its `return` until that call
    // settles: it is not waited for then.
    const ended = body.return?.(undefined);
    if (stalled)
      void ended?.catch(() => {}); // not waited for (see above), so not thrown either
    else await ended;
  }
}
