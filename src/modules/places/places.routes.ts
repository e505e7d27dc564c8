import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { authOf } from '../../http/guard.ts';
import { Done, IdParams, Page, Success } from '../../http/schemas.ts';
import { actorOf } from '../audit/audit.repository.ts';
import { CreatePlaceBody, ListPlacesQuery, PlaceItem, UpdatePlaceBody } from './places.schemas.ts';
import type { PlacesService } from './places.service.ts';

interface PlacesRouteDeps {
  places: PlacesService;
}

const tags = ['Places'];

const manage = { permission: 'places:manage' as const };

const read = { permission: 'authenticated' as const };

const matching =
  'Wherever a place is compared (voter filters, segments, silence periods, coverage), a value matches a place when it equals its name or any alias in the place-name normal form (NFKC, spaces collapsed, invisible characters dropped, case folded); values no place holds are compared in that form.';

/** `/api/places`: everyone reads; politicians and managers keep them. */
export const placesRoutes: FastifyPluginAsyncTypebox<PlacesRouteDeps> = async (app, deps) => {
  for (const routes of [placeEditingRoutes, placeDeletionRoutes]) await routes(app, deps);
};

const placeEditingRoutes: FastifyPluginAsyncTypebox<PlacesRouteDeps> = async (app, { places }) => {
  app.get(
    '/places',
    {
      config: read,
      schema: {
        tags,
        summary: "List the workspace's constituencies, wards and booths",
        description: matching,
        querystring: ListPlacesQuery,
        response: { 200: Success(Page(PlaceItem)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await places.list(authOf(request).workspaceId, request.query),
    }),
  );

  app.get(
    '/places/:id',
    {
      config: read,
      schema: { tags, summary: 'One place', params: IdParams, response: { 200: Success(PlaceItem) } },
    },
    async (request) => ({
      success: true as const,
      data: await places.get(authOf(request).workspaceId, request.params.id),
    }),
  );

  app.post(
    '/places',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Add a place with its aliases',
        description: 'A name or alias another place of the kind has is 409.',
        body: CreatePlaceBody,
        response: { 201: Success(PlaceItem) },
      },
    },
    async (request, reply) => {
      const data = await places.create(authOf(request).workspaceId, actorOf(request), request.body);
      return reply.code(201).send({ success: true, message: 'Place added.', data });
    },
  );

  app.patch(
    '/places/:id',
    {
      config: manage,
      schema: {
        tags,
        summary: "Change a place's name, aliases or code",
        description: '`aliases` replaces the list. A name or alias another place of the kind has is 409.',
        params: IdParams,
        body: UpdatePlaceBody,
        response: { 200: Success(PlaceItem) },
      },
    },
    async (request) => {
      const { workspaceId } = authOf(request);
      const data = await places.update(workspaceId, actorOf(request), request.params.id, request.body);
      return { success: true as const, message: 'Place updated.', data };
    },
  );
};

const placeDeletionRoutes: FastifyPluginAsyncTypebox<PlacesRouteDeps> = async (app, { places }) => {
  app.delete(
    '/places/:id',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Remove a place (voters keep their values; they match it no longer)',
        params: IdParams,
        response: { 200: Done },
      },
    },
    async (request) => {
      await places.remove(authOf(request).workspaceId, actorOf(request), request.params.id);
      return { success: true as const, message: 'Place removed.' };
    },
  );
};
