import multipart from '@fastify/multipart';
import { filePart, MAX_FILE_PARTS } from '../../http/multipart.ts';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { AppError, validationError } from '../../errors.ts';
import { sendDownload } from '../../http/download.ts';
import { authOf } from '../../http/guard.ts';
import { Done, IdParams, Page, Success } from '../../http/schemas.ts';
import { validatorCompiler } from '../../http/validation.ts';
import { FairGate } from '../../lib/fair-gate.ts';
import { actorOf } from '../audit/audit.repository.ts';
import { CreateOptOutBody, ImportOptOutsResult, ListOptOutsQuery, OptOutItem } from './opt-outs.schemas.ts';
import type { OptOutsService } from './opt-outs.service.ts';

/** Largest opt-out CSV accepted (about 10 MB, some 200,000 rows). */
const MAX_IMPORT_BYTES = 10 * 1024 * 1024;
/** Opt-out imports running at once in the process, and per workspace; how long one waits for its turn. */
const IMPORTS_AT_ONCE = 2;
const IMPORT_TURN_WAIT_MS = 30_000;

interface OptOutsRouteDeps {
  optOuts: OptOutsService;
  idleTimeoutMs: number;
}

const importTurns = new FairGate(IMPORTS_AT_ONCE, 1, IMPORT_TURN_WAIT_MS, 'Opt-out imports');

const tags = ['Consent'];

const config = { permission: 'consent:manage' as const };

export const optOutsRoutes: FastifyPluginAsyncTypebox<OptOutsRouteDeps> = async (app, deps) => {
  await app.register(multipart, {
    limits: { fileSize: MAX_IMPORT_BYTES, files: MAX_FILE_PARTS, fields: 5, parts: 5, headerPairs: 100 },
  });
  for (const routes of [optOutRoutes, optOutImportRoutes, optOutExportRoutes]) await routes(app, deps);
};

const optOutRoutes: FastifyPluginAsyncTypebox<OptOutsRouteDeps> = async (app, { optOuts }) => {
  app.get(
    '/opt-outs',
    {
      config,
      schema: {
        tags,
        summary: 'List opt-outs, newest first',
        description:
          'Filters: `channel` (exact, `all` included) and `address` (a phone or email, normalised).',
        querystring: ListOptOutsQuery,
        response: { 200: Success(Page(OptOutItem)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await optOuts.list(authOf(request).workspaceId, request.query),
    }),
  );

  app.post(
    '/opt-outs',
    {
      config,
      schema: {
        tags,
        summary: 'Opt an address out of a channel (or of all)',
        description:
          'Phones are kept in E.164, emails lower-cased. 201 with the new opt-out, or 200 with the one that already ' +
          'exists for that address and channel. Nothing is sent to an opted-out address on that channel again: ' +
          '`send` answers 422, broadcasts and campaigns fail its message with `error_code: "opted_out"` (refunded).',
        body: CreateOptOutBody,
        response: { 200: Success(OptOutItem), 201: Success(OptOutItem) },
      },
    },
    async (request, reply) => {
      const { item, created } = await optOuts.create(
        authOf(request).workspaceId,
        actorOf(request),
        request.body,
      );
      return reply
        .code(created ? 201 : 200)
        .send({ success: true, message: created ? 'Opted out.' : 'Already opted out.', data: item });
    },
  );

  app.delete(
    '/opt-outs/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Remove an opt-out (the address may be messaged again)',
        params: IdParams,
        response: { 200: Done },
      },
    },
    async (request) => {
      await optOuts.remove(authOf(request).workspaceId, actorOf(request), request.params.id);
      return { success: true as const, message: 'Opt-out removed.' };
    },
  );
};

const optOutImportRoutes: FastifyPluginAsyncTypebox<OptOutsRouteDeps> = async (app, { optOuts }) => {
  app.post(
    '/opt-outs/import',
    {
      config,
      validatorCompiler: (route) => (route.httpPart === 'body' ? () => true : validatorCompiler(route)),
      schema: {
        tags,
        summary: 'Import opt-outs from a CSV file (multipart part "file")',
        description:
          'Header row naming `address`, and optionally `channel` (one of the four or `all`; `all` when absent or ' +
          'empty) and `reason`; other columns are ignored, so an export imports back. Valid rows are added ' +
          '(source `manual`), existing ones left as they are, invalid ones reported by line. Rows are added a few ' +
          'hundred at a time; imports run one per workspace and two in the process at once, the others wait ' +
          'their turn (503 with Retry-After after 30 s).',
        consumes: ['multipart/form-data'],
        body: Type.Object(
          { file: Type.String({ format: 'binary', description: 'The CSV file.' }) },
          { required: ['file'] },
        ),
        response: { 200: Success(ImportOptOutsResult) },
      },
    },
    async (request) => {
      if (!request.isMultipart()) {
        throw new AppError(
          'bad_request',
          'Unsupported Content-Type: send the CSV as multipart/form-data in a part named "file".',
        );
      }
      let text: string;
      try {
        const part = await filePart(request);
        if (!part || part.fieldname !== 'file') {
          part?.file.resume();
          throw validationError({ file: ['is required: send the CSV in a multipart part named "file".'] });
        }
        const bytes = await part.toBuffer();
        text = bytes.toString('utf8');
      } catch (error) {
        if (error instanceof AppError) throw error;
        if ((error as { code?: string }).code === 'FST_REQ_FILE_TOO_LARGE') {
          throw new AppError('payload_too_large', `The file is larger than ${MAX_IMPORT_BYTES} bytes.`);
        }
        throw new AppError('bad_request', 'The multipart body could not be read.');
      }
      // Opt-out imports take turns: one per workspace and IMPORTS_AT_ONCE in the process at a time, the
      // rest queued by workspace (503 after a while), so parallel uploads cannot pile up their work.
      const { workspaceId } = authOf(request);
      const leave = await importTurns.acquire(workspaceId);
      let data;
      try {
        data = await optOuts.import(workspaceId, actorOf(request), text);
      } finally {
        leave();
      }
      return {
        success: true as const,
        message: `Import finished: ${data.created} created, ${data.existing} existing, ${data.failed} failed.`,
        data,
      };
    },
  );
};

const optOutExportRoutes: FastifyPluginAsyncTypebox<OptOutsRouteDeps> = async (
  app,
  { optOuts, idleTimeoutMs },
) => {
  app.get(
    '/opt-outs/export',
    {
      config,
      schema: {
        tags,
        summary: 'Export every opt-out as CSV',
        description: 'Columns: id, address, channel, source, reason, created_at. Imports back unchanged.',
        produces: ['text/csv; charset=utf-8'],
        response: {
          200: {
            description: 'The CSV file.',
            content: { 'text/csv; charset=utf-8': { schema: { type: 'string' } } },
          },
        },
      },
    },
    async (request, reply) => {
      await sendDownload(request, reply, optOuts.export(authOf(request).workspaceId), idleTimeoutMs);
    },
  );
};
