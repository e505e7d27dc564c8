import multipart from '@fastify/multipart';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { AppError, validationError } from '../../errors.ts';
import { sendDownload } from '../../http/download.ts';
import { authOf } from '../../http/guard.ts';
import { Page, PageQuery, Success } from '../../http/schemas.ts';
import { validatorCompiler } from '../../http/validation.ts';
import { exportFormats } from './voters.export-format.ts';
import { parseExportFilters, type VoterExports } from './voters.export.ts';
import { actorOf } from '../audit/audit.repository.ts';
import type { VoterImportJobs } from './voters.import-jobs.ts';
import type { VoterImporter } from './voters.import.ts';

const ImportErrors = Type.Array(
  Type.Object({
    row: Type.Integer({
      description: 'Line of the file where the row starts (the header is line 1).',
    }),
    field: Type.String(),
    message: Type.String(),
  }),
  { description: 'One entry per problem, the first IMPORT_MAX_ERRORS (default 1000) of them.' },
);

const ImportResultSchema = Type.Object({
  imported: Type.Integer({ description: 'Voters this import created (new name + phone identities).' }),
  updated: Type.Integer({
    description:
      'The other valid rows: each matched a voter that already existed (same name, case-insensitive and spaces collapsed, and same phone) and updated its fields, or repeated an identity seen on an earlier line of the file (applied in line order). A matched voter changes only in the fields the row gives: a missing column or an empty cell keeps the field. imported + updated + failed = the data rows of the file (blank rows aside).',
  }),
  failed: Type.Integer({ description: 'Rows refused; nothing of them was written.' }),
  dry_run: Type.Boolean({ description: 'true when nothing was written (`?dry_run=true`).' }),
  errors: ImportErrors,
});

const NullableTimestamp = Type.Union([Type.String({ format: 'date-time' }), Type.Null()]);

const ImportJob = Type.Object(
  {
    id: Type.String({ pattern: '^imp_[0-9]+$', description: '`imp_<n>`.' }),
    status: Type.Union(
      [Type.Literal('queued'), Type.Literal('running'), Type.Literal('completed'), Type.Literal('failed')],
      {
        description:
          '`queued -> running -> completed | failed`. `failed`: the file as a whole could not be imported (`message` says why) and nothing of it was applied.',
      },
    ),
    file_name: Type.String(),
    bytes: Type.Integer({ description: 'Size of the stored upload.' }),
    progress: Type.Object({ bytes_read: Type.Integer(), rows_read: Type.Integer() }),
    imported: Type.Integer(),
    updated: Type.Integer(),
    failed: Type.Integer(),
    errors: ImportErrors,
    message: Type.Union([Type.String(), Type.Null()], { description: 'Why a failed job failed.' }),
    created_at: Type.String({ format: 'date-time' }),
    started_at: NullableTimestamp,
    finished_at: NullableTimestamp,
  },
  { title: 'VoterImportJob' },
);

const JobParams = Type.Object({
  import_id: Type.String({ maxLength: 40, description: 'The job id, `imp_<n>`.' }),
});

/** RFC 7240: whether a Prefer header asks for `respond-async`. */
function prefersAsync(header: string | string[] | undefined): boolean {
  const values = Array.isArray(header) ? header : header ? [header] : [];
  return values.some((value) =>
    value.split(',').some((p) => p.split(';')[0]!.trim().toLowerCase() === 'respond-async'),
  );
}

const ImportQuery = Type.Object({
  dry_run: Type.Boolean({
    default: false,
    description:
      '`true`: every check runs and the answer has the same counts and errors (with `dry_run: true`), but nothing is written.',
  }),
});

const ExportQuery = Type.Object({
  format: Type.Union([Type.Literal('csv'), Type.Literal('excel')], {
    default: 'csv',
    description: '`csv` (default) or `excel` (.xlsx).',
  }),
  filters: Type.Optional(
    Type.String({
      description:
        'A JSON object with any of `constituency`, `booth`, `ward`, `search` (as the list filters), e.g. `{"constituency":"Varanasi","ward":"7"}`. Anything else is 422.',
    }),
  ),
});

const importDescription = `Multipart form data with one part \`file\`: a CSV file, UTF-8 with or without a BOM, up to
IMPORT_MAX_BYTES (default 100 MiB; larger is 413 and nothing is written). Only the first file part is
read, and it must be named \`file\`; other parts are ignored.

The header row names the columns \`name, phone, email, constituency, booth, ward, address\` in any order and
case; other columns (such as an export's \`id\`, \`created_at\`, \`updated_at\`) are ignored; \`name\` and
\`phone\` are required columns, and no voter column may be named twice (422 otherwise). Fields may be quoted
("..." with "" for a quote, holding commas and line breaks); lines end in LF, CRLF or CR alone; blank rows are
skipped. Each row is checked as a create through the API would be; a leading \`'\` that an export put before a
formula-like value is removed.

A row with the same name (case-insensitive, spaces collapsed) and phone as a voter of the workspace updates that
voter instead of adding another; within one file the later row wins. The file is read to its end before
anything is written, and then applied as a whole: a file refused part-way (too large, not UTF-8, an unclosed
quote, a line of over a million characters) leaves the voters unchanged.

A row that matches a voter changes only what the file says: a column the file lacks leaves that field as it is,
and so does an empty cell (clear a field with \`PUT /api/voters/{id}\`). \`?dry_run=true\` runs every check and
answers the same counts and errors with \`dry_run: true\`, writing nothing.`;

const exportDescription = `A file download (\`Content-Disposition: attachment; filename="voters-<YYYY-MM-DD>.csv|xlsx"\`),
streamed in id order. Columns: id, name, phone, email, constituency, booth, ward, address, created_at,
updated_at, after a header row. CSV: UTF-8 without a BOM, lines ending in LF, a field quoted ("..." with "" for a
quote) when it holds a comma, quote or line break, an empty field for a missing value. A value a spreadsheet would run as a formula (starting with =, +, -, @, tab or
CR and not a plain number such as +919812345678) is written with a leading \`'\`. An exported CSV imports back
unchanged.

A workspace runs at most EXPORT_MAX_CONCURRENT (default 2) exports at once: one more is 429
\`rate_limit_exceeded\` with \`Retry-After\`. A download that makes no progress for EXPORT_IDLE_TIMEOUT_MS (default
30 s) is ended: the connection is closed before the end of the file.`;

/** Voter import (multipart CSV) and export (CSV, XLSX). */
export const votersTransferRoutes: FastifyPluginAsyncTypebox<{
  importer: VoterImporter;
  jobs: VoterImportJobs;
  exports: VoterExports;
  maxImportBytes: number;
  idleTimeoutMs: number;
}> = async (app, { importer, jobs, exports, maxImportBytes, idleTimeoutMs }) => {
  const tags = ['Voters'];

  await app.register(multipart, {
    limits: { fileSize: maxImportBytes, files: 1, fields: 20, parts: 20, headerPairs: 100 },
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
        body: Type.Object(
          { file: Type.String({ format: 'binary', description: 'The CSV file.' }) },
          { required: ['file'] },
        ),
        headers: Type.Object({
          prefer: Type.Optional(
            Type.String({
              description:
                '`respond-async` (RFC 7240): the upload is stored and the answer is 202 with an import job, run in the background (see `GET /api/voters/imports/{id}`).',
            }),
          ),
        }),
        response: {
          200: Success(ImportResultSchema),
          202: Success(ImportJob, 'The import job, queued. `Location` names it.'),
        },
      },
    },
    async (request, reply) => {
      const auth = authOf(request);
      if (!request.isMultipart()) {
        throw new AppError(
          'bad_request',
          'Unsupported Content-Type: send the CSV as multipart/form-data in a part named "file".',
        );
      }
      let part;
      try {
        part = await request.file();
      } catch (error) {
        if (error instanceof AppError) throw error;
        throw new AppError('bad_request', 'The multipart body could not be read.');
      }
      if (!part || part.fieldname !== 'file') {
        part?.file.resume();
        throw validationError({ file: ['is required: send the CSV in a multipart part named "file".'] });
      }
      const file = part.file;
      const dryRun = request.query.dry_run;
      if (prefersAsync(request.headers.prefer)) {
        if (dryRun) {
          file.resume();
          throw validationError({ dry_run: ['cannot be combined with Prefer: respond-async.'] });
        }
        const job = await jobs.enqueue(auth.workspaceId, actorOf(request), part.filename, {
          stream: file,
          truncated: () => file.truncated,
        });
        return reply
          .code(202)
          .header('location', `/api/voters/imports/${job.id}`)
          .header('preference-applied', 'respond-async')
          .send({ success: true, message: `Import job ${job.id} queued.`, data: job });
      }
      const result = await importer.run(
        auth.workspaceId,
        { stream: file, truncated: () => file.truncated },
        { dryRun, audit: dryRun ? undefined : { actor: actorOf(request), fileName: part.filename } },
      );
      const counts = `${result.imported} created, ${result.updated} updated, ${result.failed} failed`;
      return {
        success: true as const,
        message: dryRun ? `Dry run, nothing written: ${counts}.` : `Import finished: ${counts}.`,
        data: { ...result, dry_run: dryRun },
      };
    },
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
      const workspaceId = authOf(request).workspaceId;
      const { file, leave } = await exports.start(
        workspaceId,
        actorOf(request),
        filters,
        request.query.format,
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
