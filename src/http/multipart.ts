import type { MultipartFile } from '@fastify/multipart';
import type { FastifyRequest } from 'fastify';

/** File parts a multipart upload may carry: the one named `file`, and a few others, read and thrown away. */
export const MAX_FILE_PARTS = 4;

/**
 * The multipart body's file part named `name`, wherever it stands among the parts: other file parts before it
 * are read and thrown away (a client may send a note or a second attachment first); fields before it are in
 * its `fields`. Undefined when no part has that name.
 */
export async function filePart(request: FastifyRequest, name = 'file'): Promise<MultipartFile | undefined> {
  // Stepped by hand: leaving a for-await loop would end the iterator, and with it the part being returned.
  const parts = request.files();
  for (;;) {
    const { value: part, done } = await parts.next();
    if (done || !part) return undefined;
    if (part.fieldname === name) return part;
    part.file.resume();
  }
}
