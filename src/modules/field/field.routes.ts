import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { authOf } from '../../http/guard.ts';
import { Done, Page, PageQuery, Success } from '../../http/schemas.ts';
import {
  CreateTurfBody,
  ListVisitsQuery,
  MarkOutcome,
  RecordMarksBody,
  RecordVisitsBody,
  ToCallItem,
  ToCallQuery,
  Turf,
  TurfParams,
  TurfProgress,
  Turnout,
  TurnoutQuery,
  UpdateTurfBody,
  Visit,
  VisitOutcome,
  WalkListItem,
  WalkListQuery,
} from './field.schemas.ts';
import type { PollDayService } from './poll-day.ts';
import type { TurfsService } from './turfs.ts';
import type { VisitBody } from './visit-batch.ts';
import type { VisitsService } from './visits.ts';

interface FieldRouteDeps {
  turfs: TurfsService;
  visits: VisitsService;
  pollDay: PollDayService;
}

const tags = ['Field work'];
const manage = { permission: 'turfs:manage' as const };
const work = { permission: 'field:work' as const };

/** Turfs, walk lists, visits, progress and poll day (the contract's fourth part, "Field work"). */
export const fieldRoutes: FastifyPluginAsyncTypebox<FieldRouteDeps> = async (app, deps) => {
  for (const routes of [turfEditingRoutes, turfReadingRoutes, visitRoutes, pollDayRoutes])
    await routes(app, deps);
};

const turfEditingRoutes: FastifyPluginAsyncTypebox<FieldRouteDeps> = async (app, { turfs }) => {
  app.post(
    '/turfs',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Make a turf: voter filters (a booth, a part, a page range...) and who works it',
        body: CreateTurfBody,
        response: { 201: Success(Turf) },
      },
    },
    async (request, reply) => {
      const data = await turfs.create(authOf(request).workspaceId, request.body);
      return reply.code(201).send({ success: true, message: 'Turf created.', data });
    },
  );

  app.patch(
    '/turfs/:id',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Rename a turf, change its filters or who works it',
        params: TurfParams,
        body: UpdateTurfBody,
        response: { 200: Success(Turf) },
      },
    },
    async (request) => ({
      success: true as const,
      message: 'Turf updated.',
      data: await turfs.update(authOf(request), request.params.id, request.body),
    }),
  );

  app.delete(
    '/turfs/:id',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Delete a turf (its visits stay with their voters)',
        params: TurfParams,
        response: { 200: Done },
      },
    },
    async (request) => {
      await turfs.remove(authOf(request), request.params.id);
      return { success: true as const, message: 'Turf deleted.' };
    },
  );
};

const turfReadingRoutes: FastifyPluginAsyncTypebox<FieldRouteDeps> = async (app, { turfs, visits }) => {
  app.get(
    '/turfs',
    {
      config: work,
      schema: {
        tags,
        summary: 'List turfs (a volunteer: those assigned to them)',
        querystring: PageQuery,
        response: { 200: Success(Page(Turf)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await turfs.list(authOf(request), request.query.page, request.query.per_page),
    }),
  );

  app.get(
    '/turfs/:id',
    {
      config: work,
      schema: {
        tags,
        summary: 'Read a turf (a volunteer: one assigned to them)',
        params: TurfParams,
        response: { 200: Success(Turf) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await turfs.get(authOf(request), request.params.id),
    }),
  );

  app.get(
    '/turfs/:id/walk-list',
    {
      config: work,
      schema: {
        tags,
        summary: "The turf's voters door by door: by part, house number and serial, a household together",
        description:
          'Up to 2,000 a page. `support_level` only for politicians and managers; no custom field is listed.',
        params: TurfParams,
        querystring: WalkListQuery,
        response: { 200: Success(Page(WalkListItem)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await turfs.walkList(
        authOf(request),
        request.params.id,
        request.query.page,
        request.query.per_page,
      ),
    }),
  );

  app.get(
    '/turfs/:id/progress',
    {
      config: work,
      schema: {
        tags,
        summary: "A turf's progress: visited, met, by outcome, by support level and by canvasser",
        description: '`by_support` only for politicians and managers.',
        params: TurfParams,
        response: { 200: Success(TurfProgress) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await visits.progress(authOf(request), request.params.id),
    }),
  );
};

const visitRoutes: FastifyPluginAsyncTypebox<FieldRouteDeps> = async (app, { visits }) => {
  app.post(
    '/visits',
    {
      config: work,
      schema: {
        tags,
        summary: 'Record up to 500 visits from a device: each applied once by its client_id',
        description:
          'Each visit answers `created`, `duplicate` (its client_id was stored before: nothing changes) or `rejected` with its error; one rejected visit does not stop the others. A volunteer records visits only for voters of their turfs, and no support level or sensitive field. A field changed on the service after `visited_at` keeps its newer value and is listed in `not_applied`.',
        body: RecordVisitsBody,
        response: { 200: Success(Type.Object({ visits: Type.Array(VisitOutcome) })) },
      },
    },
    async (request) => ({
      success: true as const,
      data: { visits: await visits.record(authOf(request), request.body.visits as VisitBody[]) },
    }),
  );

  app.get(
    '/visits',
    {
      config: work,
      schema: {
        tags,
        summary: 'List visits, newest first (a volunteer: their own)',
        querystring: ListVisitsQuery,
        response: { 200: Success(Page(Visit)) },
      },
    },
    async (request) => ({ success: true as const, data: await visits.list(authOf(request), request.query) }),
  );
};

const pollDayRoutes: FastifyPluginAsyncTypebox<FieldRouteDeps> = async (app, { pollDay }) => {
  app.post(
    '/poll-day/marks',
    {
      config: work,
      schema: {
        tags,
        summary: 'Mark who has voted: by voter id, or by part and serial number as on a booth slip',
        description:
          "Up to 500 marks, each applied once by its client_id. A voter's state is their mark with the latest marked_at. A volunteer marks only voters of their turfs. Each new mark is a `poll_day.marked` event on the live stream.",
        body: RecordMarksBody,
        response: { 200: Success(Type.Object({ marks: Type.Array(MarkOutcome) })) },
      },
    },
    async (request) => ({
      success: true as const,
      data: { marks: await pollDay.mark(authOf(request), request.body.marks) },
    }),
  );

  app.get(
    '/poll-day/turnout',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Turnout by booth or part: voters, voted, supporters and supporters voted',
        querystring: TurnoutQuery,
        response: { 200: Success(Turnout) },
      },
    },
    async (request) => {
      const { group_by, ...raw } = request.query;
      return {
        success: true as const,
        data: await pollDay.turnout(authOf(request).workspaceId, group_by, raw),
      };
    },
  );

  app.get(
    '/poll-day/to-call',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Supporters (support level 1 or 2) of a booth or part not yet marked as voted, with phones',
        querystring: ToCallQuery,
        response: { 200: Success(Page(ToCallItem)) },
      },
    },
    async (request) => {
      const { page, per_page, ...where } = request.query;
      return {
        success: true as const,
        data: await pollDay.toCall(authOf(request).workspaceId, where, page, per_page),
      };
    },
  );
};
