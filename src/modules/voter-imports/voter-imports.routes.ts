import type { FastifyRequest } from 'fastify';
import multipart from '@fastify/multipart';
import { filePart, MAX_FILE_PARTS } from '../../http/multipart.ts';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { AppError, validationError } from '../../errors.ts';
import { sendDownload } from '../../http/download.ts';
import { authOf } from '../../http/guard.ts';
import { Page, PageQuery, Success } from '../../http/schemas.ts';
import { validatorCompiler } from '../../http/validation.ts';
import { actorOf } from '../audit/audit.repository.ts';
import type { VoterImportJobs } from './import-jobs.ts';
import type { ImportMapping, VoterImporter } from './voter-imports.ts';
import {
  ImportColumns,
  ImportJob,
  ImportQuery,
  ImportResultSchema,
  importDescription,
  JobParams,
} from './voter-imports.schemas.ts';

/** RFC 7240: whether a Prefer header asks for `respond-async`. */
function prefersAsync(header: string | string[] | undefined): boolean {
  const values = Array.isArray(header) ? header : header ? [header] : [];
  return values.some((value) =>
    value.split(',').some((p) => p.split(';')[0]!.trim().toLowerCase() === 'respond-async'),
  );
}

const ImportUpload = Type.Object(
  {
    mapping: Type.Optional(
      Type.String({
        description:
          'JSON `{ "<heading of the file>": "<field>" | "ignore" }`, sent before the file part: the office\'s own headings, ' +
          'beside the roll headings the import knows (GET /api/voters/import/columns lists the fields). Remembered as ' +
          "the workspace's last mapping.",
      }),
    ),
    language: Type.Optional(
      Type.Union([Type.Literal('en'), Type.Literal('hi')], {
        description: 'Sent before the file part: the language of the rows that give none.',
      }),
    ),
    file: Type.String({ format: 'binary', description: 'The CSV file.' }),
  },
  { required: ['file'] },
);

const PreferHeader = Type.Object({
  prefer: Type.Optional(
    Type.String({
      description:
        '`respond-async` (RFC 7240): the upload is stored and the answer is 202 with an import job, run in the background (see `GET /api/voters/imports/{id}`).',
    }),
  ),
});

/** The upload's `file` part, with the `mapping` and `language` fields sent before it; 400/422 otherwise. */
async function readUpload(request: FastifyRequest) {
  if (!request.isMultipart()) {
    throw new AppError(
      'bad_request',
      'Unsupported Content-Type: send the CSV as multipart/form-data in a part named "file".',
    );
  }
  let part;
  try {
    part = await filePart(request);
  } catch (error) {
    if (error instanceof AppError) throw error;
    throw new AppError('bad_request', 'The multipart body could not be read.');
  }
  if (!part || part.fieldname !== 'file') {
    part?.file.resume();
    throw validationError({ file: ['is required: send the CSV in a multipart part named "file".'] });
  }
  const file = part.file;
  // The `mapping` field, sent before the file part (the fields before it are read with it).
  const given = part.fields.mapping;
  const mappingText =
    given && !Array.isArray(given) && given.type === 'field' ? String(given.value) : undefined;
  const languageField = part.fields.language;
  const language =
    languageField && !Array.isArray(languageField) && languageField.type === 'field'
      ? String(languageField.value)
      : undefined;
  if (language !== undefined && language !== 'en' && language !== 'hi') {
    file.resume();
    throw validationError({ language: ['must be en or hi: the language of the rows that give none.'] });
  }
  return { part, file, mappingText, language };
}

interface VoterImportsRouteDeps {
  importer: VoterImporter;
  jobs: VoterImportJobs;
  maxImportBytes: number;
  idleTimeoutMs: number;
}

const tags = ['Voters'];

/** Voter import (multipart CSV, at once or as a background job) and the jobs' progress and failed rows. */
export const voterImportsRoutes: FastifyPluginAsyncTypebox<VoterImportsRouteDeps> = async (app, deps) => {
  const { maxImportBytes } = deps;
  await app.register(multipart, {
    limits: { fileSize: maxImportBytes, files: MAX_FILE_PARTS, fields: 20, parts: 20, headerPairs: 100 },
  });
  // Any other body type on these routes gets an answer that says what to send.
  app.addContentTypeParser('*', (_request, _payload, done) => {
    done(
      new AppError(
        'bad_request',
        'Unsupported Content-Type: send the CSV as multipart/form-data in a part named "file".',
      ),
    );
  });
  for (const routes of [importRoutes, importJobRoutes, importErrorRoutes]) await routes(app, deps);
};

const importRoutes: FastifyPluginAsyncTypebox<VoterImportsRouteDeps> = async (app, { importer, jobs }) => {
  app.post(
    '/voters/import',
    {
      config: { permission: 'voters:import' },
      // The multipart body is read as a stream by the handler, not validated as JSON: its schema only
      // documents it in the OpenAPI document. The query string is checked as on every route.
      validatorCompiler: (route) => (route.httpPart === 'body' ? () => true : validatorCompiler(route)),
      schema: {
        tags,
        summary: 'Import voters from a CSV file (streamed; re-importing updates instead of duplicating)',
        description: importDescription,
        consumes: ['multipart/form-data'],
        querystring: ImportQuery,
        body: ImportUpload,
        headers: PreferHeader,
        response: {
          200: Success(ImportResultSchema),
          202: Success(ImportJob, 'The import job, queued. `Location` names it.'),
        },
      },
    },
    async (request, reply) => {
      const auth = authOf(request);
      const dryRun = request.query.dry_run;
      const { part, file, mappingText, language } = await readUpload(request);
      let mapping: ImportMapping | undefined;
      try {
        mapping =
          mappingText === undefined ? undefined : await importer.mapping(auth.workspaceId, mappingText);
      } catch (error) {
        file.resume();
        throw error;
      }
      if (prefersAsync(request.headers.prefer)) {
        if (dryRun) {
          file.resume();
          throw validationError({ dry_run: ['cannot be combined with Prefer: respond-async.'] });
        }
        const job = await jobs.enqueue(
          auth.workspaceId,
          actorOf(request),
          part.filename,
          { stream: file, truncated: () => file.truncated },
          mapping,
          language,
        );
        return reply
          .code(202)
          .header('location', `/api/voters/imports/${job.id}`)
          .header('preference-applied', 'respond-async')
          .send({ success: true, message: `Import job ${job.id} queued.`, data: job });
      }
      const result = await importer.run(
        auth.workspaceId,
        { stream: file, truncated: () => file.truncated },
        {
          dryRun,
          mapping,
          language,
          audit: dryRun ? undefined : { actor: actorOf(request), fileName: part.filename },
        },
      );
      const counts = `${result.imported} created, ${result.updated} updated, ${result.failed} failed${result.warnings.length > 0 ? `, ${result.warnings.length} cells left out` : ''}`;
      return {
        success: true as const,
        message: dryRun ? `Dry run, nothing written: ${counts}.` : `Import finished: ${counts}.`,
        data: { ...result, dry_run: dryRun },
      };
    },
  );
};

const importJobRoutes: FastifyPluginAsyncTypebox<VoterImportsRouteDeps> = async (app, { importer, jobs }) => {
  app.get(
    '/voters/import/columns',
    {
      config: { permission: 'voters:import' },
      schema: {
        tags,
        summary: 'What an import can fill: the fields, the roll headings it knows, and the last mapping',
        description:
          'The fields a `mapping` may name (the custom fields as `field:<key>`), the headings of Indian roll exports ' +
          'the import knows without one (compared case-insensitively, spaces and underscores alike, dots dropped), ' +
          "the headings that fill a field only where no other column does, and the workspace's last mapping (null: none yet).",
        response: { 200: Success(ImportColumns) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await importer.columns(authOf(request).workspaceId),
    }),
  );

  app.get(
    '/voters/imports',
    {
      config: { permission: 'voters:import' },
      schema: {
        tags,
        summary: "List the workspace's voter import jobs, newest first",
        querystring: PageQuery,
        response: { 200: Success(Page(ImportJob)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await jobs.list(authOf(request).workspaceId, request.query.page, request.query.per_page),
    }),
  );

  app.get(
    '/voters/imports/:import_id',
    {
      config: { permission: 'voters:import' },
      schema: {
        tags,
        summary: 'Read one voter import job: status, progress, counts, the first errors',
        params: JobParams,
        response: { 200: Success(ImportJob) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await jobs.get(authOf(request).workspaceId, request.params.import_id),
    }),
  );
};

const importErrorRoutes: FastifyPluginAsyncTypebox<VoterImportsRouteDeps> = async (
  app,
  { jobs, idleTimeoutMs },
) => {
  app.get(
    '/voters/imports/:import_id/errors.csv',
    {
      config: { permission: 'voters:import' },
      schema: {
        tags,
        summary: "A finished import job's failed rows as CSV, ready to fix and upload again",
        description:
          "The file's header row plus a last column `error`, then each failed row as it was in the file (a value a spreadsheet would run as a formula gets a leading `'`, which the import removes again) with what was wrong. 409 while the job has not finished.",
        params: JobParams,
        produces: ['text/csv'],
        response: {
          200: {
            description: 'The CSV file.',
            content: { 'text/csv': { schema: { type: 'string' } } },
          },
        },
      },
    },
    async (request, reply) => {
      const file = await jobs.errorsFile(authOf(request).workspaceId, request.params.import_id);
      await sendDownload(request, reply, file, idleTimeoutMs);
    },
  );
};
