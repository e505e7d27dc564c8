import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { sendDownload } from '../../http/download.ts';
import { authOf } from '../../http/guard.ts';
import { AppError } from '../../errors.ts';
import { actorOf } from '../audit/audit.repository.ts';
import { exportFormats } from './export-format.ts';
import { parseExportFilters, type VoterExports } from './voter-exports.ts';
import { ExportQuery, exportDescription } from './voter-exports.schemas.ts';

/** Voter export: CSV or Excel, filtered like the list, streamed. */
export const voterExportsRoutes: FastifyPluginAsyncTypebox<{
  exports: VoterExports;
  idleTimeoutMs: number;
}> = async (app, { exports, idleTimeoutMs }) => {
  const tags = ['Voters'];

  app.get(
    '/voters/export',
    {
      config: { permission: 'voters:export' },
      schema: {
        tags,
        summary: 'Export voters as CSV or Excel (.xlsx), filtered like the list',
        description: exportDescription,
        querystring: ExportQuery,
        produces: [exportFormats.csv.contentType, exportFormats.excel.contentType],
        response: {
          200: {
            description: 'The file.',
            content: {
              [exportFormats.csv.contentType]: { schema: { type: 'string' } },
              [exportFormats.excel.contentType]: { schema: { type: 'string', format: 'binary' } },
            },
          },
        },
      },
    },
    async (request, reply) => {
      const filters = parseExportFilters(request.query.filters);
      const auth = authOf(request);
      if (request.query.include_sensitive && auth.role !== 'politician')
        throw new AppError(
          'forbidden',
          'Only a politician may export sensitive data (include_sensitive=true).',
        );
      const { file, leave } = await exports.start(
        auth.workspaceId,
        actorOf(request),
        filters,
        request.query.format,
        request.query.include_sensitive,
      );
      try {
        // The 200 schema documents the file as a string; the bytes go out as they come.
        await sendDownload(request, reply, file, idleTimeoutMs);
      } finally {
        leave();
      }
    },
  );
};
