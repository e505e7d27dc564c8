import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';

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

/**
 * Sends `file` with status 200 as an attachment, one chunk at a time: the next chunk is asked for once the
 * socket has taken the one before (its write callback), so a slow client slows the producer and no chunk
 * is still being written when its producer gets it back. An error before the first chunk goes through the
 * usual error handling; after it the headers are out, so the error is logged and the connection closed
 * (the client sees a cut download). A client that goes away ends the body (its `return` runs).
 */
export async function sendDownload(
  request: FastifyRequest,
  reply: FastifyReply,
  file: Download,
): Promise<void> {
  const body = file.body;
  const first = await body.next();
  reply
    .header('content-type', file.contentType)
    .header('content-disposition', `attachment; filename="${file.filename}"`)
    .header('cache-control', 'no-store')
    .hijack();
  const res = reply.raw;
  res.writeHead(200, reply.getHeaders() as OutgoingHttpHeaders);
  try {
    for (let next = first; !next.done; next = await body.next()) await written(res, next.value);
    res.end();
  } catch (error) {
    if (!res.destroyed) request.log.error({ err: error }, 'the download stopped part-way');
    res.destroy();
  } finally {
    await body.return?.();
  }
}
