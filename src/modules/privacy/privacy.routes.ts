import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Kysely } from 'kysely';
import { Type } from 'typebox';
import type { Database } from '../../db/schema.ts';
import { authOf } from '../../http/guard.ts';
import { Page, PageQuery, Success } from '../../http/schemas.ts';
import { actorOf } from '../audit/audit.repository.ts';
import { accessExport } from './access-export.ts';
import type { Erasure } from './erasure.ts';
import {
  Breach,
  BreachParams,
  CreateBreachBody,
  CreateRequestBody,
  ListRequestsQuery,
  Notice,
  NoticeBody,
  PrivacyRequest,
  RequestParams,
  UpdateBreachBody,
  UpdateRequestBody,
} from './privacy.schemas.ts';
import type { PrivacyService } from './privacy.service.ts';

interface PrivacyRouteDeps {
  db: Kysely<Database>;
  privacy: PrivacyService;
  erasure: Erasure;
}

const tags = ['Privacy'];
const requests = { permission: 'privacy:requests' as const };
const manage = { permission: 'privacy:manage' as const };

/** The notice, data-principal requests (with the export and erasure) and the breach register. */
export const privacyRoutes: FastifyPluginAsyncTypebox<PrivacyRouteDeps> = async (app, deps) => {
  for (const routes of [noticeRoutes, requestRoutes, personRoutes, breachRoutes]) await routes(app, deps);
};

const noticeRoutes: FastifyPluginAsyncTypebox<PrivacyRouteDeps> = async (app, { privacy }) => {
  app.get(
    '/privacy/notice',
    {
      config: { permission: 'authenticated' },
      schema: {
        tags,
        summary: "The workspace's privacy notice (version 0 until one is written)",
        response: { 200: Success(Notice) },
      },
    },
    async (request) => ({ success: true as const, data: await privacy.notice(authOf(request).workspaceId) }),
  );
  app.put(
    '/privacy/notice',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Write the privacy notice (a new version each time; audited as privacy_notice.updated)',
        description:
          'Consent recorded from now on names this version. The public page `/privacy/<public_id>` shows it in English and Hindi (English where no Hindi text is given).',
        body: NoticeBody,
        response: { 200: Success(Notice) },
      },
    },
    async (request) => {
      const { workspaceId } = authOf(request);
      const data = await privacy.setNotice(workspaceId, actorOf(request), request.body as never);
      return { success: true as const, message: 'Privacy notice saved.', data };
    },
  );
};

const requestRoutes: FastifyPluginAsyncTypebox<PrivacyRouteDeps> = async (app, { privacy }) => {
  app.get(
    '/privacy/requests',
    {
      config: requests,
      schema: {
        tags,
        summary: 'Data-principal requests, newest first (filter by status, type, overdue)',
        querystring: ListRequestsQuery,
        response: { 200: Success(Page(PrivacyRequest)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await privacy.listRequests(authOf(request).workspaceId, request.query),
    }),
  );
  app.post(
    '/privacy/requests',
    {
      config: requests,
      schema: {
        tags,
        summary: 'Record a request the office received (by letter, phone, in person)',
        description:
          '`due_at` is now plus PRIVACY_RESPONSE_DAYS (default 30). Without `voter_id`, the one voter with the address (if exactly one) is linked. Audited as privacy_request.created.',
        body: CreateRequestBody,
        response: { 201: Success(PrivacyRequest) },
      },
    },
    async (request, reply) => {
      const { workspaceId } = authOf(request);
      const data = await privacy.createRequest(workspaceId, actorOf(request), request.body);
      return reply.code(201).send({ success: true, message: 'Request recorded.', data });
    },
  );
  app.get(
    '/privacy/requests/:id',
    {
      config: requests,
      schema: {
        tags,
        summary: 'One request',
        params: RequestParams,
        response: { 200: Success(PrivacyRequest) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await privacy.request(authOf(request).workspaceId, request.params.id),
    }),
  );
  app.patch(
    '/privacy/requests/:id',
    {
      config: requests,
      schema: {
        tags,
        summary: 'Verify, complete or reject a request; link its voter; note what was done',
        description:
          'A completed or rejected request is closed: changing its status again is 409. Completing is audited as privacy_request.completed.',
        params: RequestParams,
        body: UpdateRequestBody,
        response: { 200: Success(PrivacyRequest) },
      },
    },
    async (request) => {
      const { workspaceId } = authOf(request);
      const data = await privacy.updateRequest(
        workspaceId,
        actorOf(request),
        request.params.id,
        request.body,
      );
      return { success: true as const, message: 'Request updated.', data };
    },
  );
};

const personRoutes: FastifyPluginAsyncTypebox<PrivacyRouteDeps> = async (app, { db, erasure }) => {
  app.get(
    '/privacy/requests/:id/export',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Everything the workspace keeps about the person, as a ZIP of JSON files',
        description:
          'The voter record with fields (sensitive ones too) and tags, consent, messages both ways, conversations, grievances, survey responses, visits, poll-day marks, opt-outs and the audit entries about them. Audited as privacy.exported. After an erasure it is 409: nothing is left to export.',
        params: RequestParams,
        response: {
          200: {
            description: 'The ZIP',
            content: { 'application/zip': { schema: Type.String({ format: 'binary' }) } },
          },
        },
      },
    },
    async (request, reply) => {
      const { workspaceId } = authOf(request);
      const { fileName, zip } = await accessExport(db, workspaceId, actorOf(request), request.params.id);
      return reply
        .type('application/zip')
        .header('content-disposition', `attachment; filename="${fileName}"`)
        .header('cache-control', 'no-store')
        .send(zip as never);
    },
  );
  app.post(
    '/privacy/requests/:id/erase',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Erase the person: their personal data leaves every table of the workspace',
        description:
          "Only an `erasure` request (another type, or a rejected request, is 409). Removes the voter (fields, tags, visits, poll-day marks), rewrites message bodies and addresses, replies, conversations, grievances' reporter, survey answers' free text, and sweeps every text column of every table (webhook payloads, live events, audit details, import errors, stored replies of idempotent requests...) for the person's phone, email, EPIC number and, in rows about them, their name. Keeps a keyed hash of each address on an opt-out of every channel (they are never messaged again), the counts, and an audit entry (privacy.erased) naming the request. Stored uploads holding the person are deleted; one an import still uses is listed in `erasure.remaining`. Erasing twice changes nothing.",
        params: RequestParams,
        response: { 200: Success(PrivacyRequest) },
      },
    },
    async (request) => {
      const { workspaceId } = authOf(request);
      const data = await erasure.erase(workspaceId, actorOf(request), request.params.id);
      return { success: true as const, message: 'The person is erased.', data };
    },
  );
};

const breachRoutes: FastifyPluginAsyncTypebox<PrivacyRouteDeps> = async (app, { privacy }) => {
  app.get(
    '/privacy/breaches',
    {
      config: manage,
      schema: {
        tags,
        summary: 'The breach register, newest first',
        querystring: PageQuery,
        response: { 200: Success(Page(Breach)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await privacy.listBreaches(
        authOf(request).workspaceId,
        request.query.page,
        request.query.per_page,
      ),
    }),
  );
  app.post(
    '/privacy/breaches',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Record a personal data breach (the Board is told within 72 hours of detection)',
        description: 'Audited as breach.recorded. `board_report_due` is `detected_at` + 72 hours.',
        body: CreateBreachBody,
        response: { 201: Success(Breach) },
      },
    },
    async (request, reply) => {
      const { workspaceId } = authOf(request);
      const data = await privacy.recordBreach(workspaceId, actorOf(request), request.body);
      return reply.code(201).send({ success: true, message: 'Breach recorded.', data });
    },
  );
  app.patch(
    '/privacy/breaches/:id',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Record when the Board and the people affected were told (or correct the entry)',
        params: BreachParams,
        body: UpdateBreachBody,
        response: { 200: Success(Breach) },
      },
    },
    async (request) => {
      const { workspaceId } = authOf(request);
      const data = await privacy.updateBreach(workspaceId, request.params.id, request.body);
      return { success: true as const, message: 'Breach updated.', data };
    },
  );
};
