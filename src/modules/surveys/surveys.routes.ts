import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { AppError } from '../../errors.ts';
import { sendDownload } from '../../http/download.ts';
import { authOf } from '../../http/guard.ts';
import { Done, Page, PageQuery, Success } from '../../http/schemas.ts';
import { actorOf } from '../audit/audit.repository.ts';
import { exportFormats } from '../voter-exports/export-format.ts';
import type { SurveyResults } from './survey-results.ts';
import {
  CreateRunBody,
  CreateSurveyBody,
  ResponsesExportQuery,
  ResponsesQuery,
  ResultsQuery,
  RunParams,
  Survey,
  SurveyParams,
  SurveyResponse,
  SurveyResults as SurveyResultsSchema,
  SurveyRun,
  CancelledSurveyRun,
  UpdateSurveyBody,
} from './surveys.schemas.ts';
import type { SurveysService } from './surveys.service.ts';
import type { SurveyRunsService } from './survey-runs.service.ts';

interface SurveysRouteDeps {
  surveys: SurveysService;
  runs: SurveyRunsService;
  results: SurveyResults;
  idleTimeoutMs: number;
}

const tags = ['Surveys'];

const config = { permission: 'surveys:manage' as const };

/** Surveys, their runs, results and responses (politicians and managers: `surveys:manage`). */
export const surveysRoutes: FastifyPluginAsyncTypebox<SurveysRouteDeps> = async (app, deps) => {
  for (const routes of [
    surveyEditingRoutes,
    surveyDeletionAndRunRoutes,
    surveyRunAndResultRoutes,
    surveyResponseRoutes,
  ])
    await routes(app, deps);
};

const surveyEditingRoutes: FastifyPluginAsyncTypebox<SurveysRouteDeps> = async (app, { surveys }) => {
  app.post(
    '/surveys',
    {
      config,
      schema: {
        tags,
        summary: 'Create a survey: questions in several languages, retries and triggers',
        description:
          "See docs/surveys.md. A keyword trigger of an active survey must not be another active survey's (409).",
        body: CreateSurveyBody,
        response: { 201: Success(Survey) },
      },
    },
    async (request, reply) => {
      const data = await surveys.create(authOf(request).workspaceId, actorOf(request), request.body);
      return reply.code(201).send({ success: true, message: 'Survey created.', data });
    },
  );

  app.get(
    '/surveys',
    {
      config,
      schema: {
        tags,
        summary: 'List surveys, newest first',
        querystring: PageQuery,
        response: { 200: Success(Page(Survey)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await surveys.list(authOf(request).workspaceId, request.query.page, request.query.per_page),
    }),
  );

  app.get(
    '/surveys/:id',
    {
      config,
      schema: { tags, summary: 'Read a survey', params: SurveyParams, response: { 200: Success(Survey) } },
    },
    async (request) => ({
      success: true as const,
      data: await surveys.get(authOf(request).workspaceId, request.params.id),
    }),
  );

  app.patch(
    '/surveys/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Change a survey, activate it or close it',
        description:
          'A survey that has run cannot change its questions (409). Closing ends its open sessions and its triggers; a closed survey stays closed.',
        params: SurveyParams,
        body: UpdateSurveyBody,
        response: { 200: Success(Survey) },
      },
    },
    async (request) => ({
      success: true as const,
      message: 'Survey updated.',
      data: await surveys.update(
        authOf(request).workspaceId,
        actorOf(request),
        request.params.id,
        request.body,
      ),
    }),
  );
};

const surveyDeletionAndRunRoutes: FastifyPluginAsyncTypebox<SurveysRouteDeps> = async (
  app,
  { surveys, runs },
) => {
  app.delete(
    '/surveys/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Delete a survey that never ran',
        description: 'A survey with responses is kept: close it instead (409).',
        params: SurveyParams,
        response: { 200: Done },
      },
    },
    async (request) => {
      await surveys.remove(authOf(request).workspaceId, actorOf(request), request.params.id);
      return { success: true as const, message: 'Survey deleted.' };
    },
  );

  app.post(
    '/surveys/:id/runs',
    {
      config,
      schema: {
        tags,
        summary: 'Run a survey on a channel for a segment, a filter or a list of recipients',
        description:
          "202: the run's sessions open in the background. The first question's credits are reserved for every recipient now (402 when short); later questions are charged as they go. Opt-outs, quiet hours, silence periods and DLT apply as to a campaign.",
        params: SurveyParams,
        body: CreateRunBody,
        response: { 202: Success(SurveyRun) },
      },
    },
    async (request, reply) => {
      const data = await runs.createRun(
        authOf(request).workspaceId,
        actorOf(request),
        request.params.id,
        request.body,
      );
      return reply.code(202).send({ success: true, message: 'Survey run started.', data });
    },
  );

  app.get(
    '/surveys/:id/runs',
    {
      config,
      schema: {
        tags,
        summary: "A survey's runs, newest first",
        params: SurveyParams,
        querystring: PageQuery,
        response: { 200: Success(Page(SurveyRun)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await runs.runs(
        authOf(request).workspaceId,
        request.params.id,
        request.query.page,
        request.query.per_page,
      ),
    }),
  );
};

const surveyRunAndResultRoutes: FastifyPluginAsyncTypebox<SurveysRouteDeps> = async (
  app,
  { runs, results },
) => {
  app.get(
    '/survey-runs/:id',
    {
      config,
      schema: {
        tags,
        summary: 'A run with its progress',
        params: RunParams,
        response: { 200: Success(SurveyRun) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await runs.run(authOf(request).workspaceId, request.params.id),
    }),
  );

  app.post(
    '/survey-runs/:id/cancel',
    {
      config,
      schema: {
        tags,
        summary: 'Cancel a scheduled or running run',
        description:
          'No one else is asked; open sessions end and their unsent questions are refunded, as is the unspent reservation.',
        params: RunParams,
        response: { 200: Success(CancelledSurveyRun) },
      },
    },
    async (request) => ({
      success: true as const,
      message: 'Survey run cancelled.',
      data: await runs.cancelRun(authOf(request).workspaceId, actorOf(request), request.params.id),
    }),
  );

  app.get(
    '/surveys/:id/results',
    {
      config,
      schema: {
        tags,
        summary:
          "A survey's results: exact counts per question and choice, and the mean of numbers, optionally by place",
        params: SurveyParams,
        querystring: ResultsQuery,
        response: { 200: Success(SurveyResultsSchema) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await results.results(
        authOf(request).workspaceId,
        request.params.id,
        request.query as Record<string, unknown>,
      ),
    }),
  );
};

const surveyResponseRoutes: FastifyPluginAsyncTypebox<SurveysRouteDeps> = async (
  app,
  { surveys, results, idleTimeoutMs },
) => {
  app.get(
    '/surveys/:id/responses',
    {
      config,
      schema: {
        tags,
        summary: "A survey's responses, newest first",
        params: SurveyParams,
        querystring: ResponsesQuery,
        response: { 200: Success(Page(SurveyResponse)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await surveys.responses(authOf(request).workspaceId, request.params.id, request.query),
    }),
  );

  app.get(
    '/surveys/:id/responses/export',
    {
      config,
      schema: {
        tags,
        summary:
          "A survey's responses as CSV or Excel, streamed (one column per question; cells formula-safe)",
        params: SurveyParams,
        querystring: ResponsesExportQuery,
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
      const auth = authOf(request);
      if (request.query.include_sensitive && auth.role !== 'politician')
        throw new AppError(
          'forbidden',
          'Only a politician may export sensitive answers (include_sensitive=true): the answers that save to support_level or a sensitive field.',
        );
      const file = await results.export(
        auth.workspaceId,
        actorOf(request),
        request.params.id,
        request.query.format,
        request.query.run_id,
        request.query.include_sensitive,
      );
      await sendDownload(request, reply, file, idleTimeoutMs);
    },
  );
};
