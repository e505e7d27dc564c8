import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { authOf } from '../../http/guard.ts';
import { Done, IdParams, Success, Timestamp } from '../../http/schemas.ts';
import { actorOf } from '../audit/audit.repository.ts';
import { StoredVoterFilters, VoterFiltersSchema } from './voters.schemas.ts';
import type { VoterFieldsService } from './voter-fields.ts';
import { TAG_IDS_MAX, type VoterTagging } from './voter-tags.ts';

const FieldType = (description?: string) =>
  Type.Union(
    [
      Type.Literal('text'),
      Type.Literal('number'),
      Type.Literal('date'),
      Type.Literal('choice'),
      Type.Literal('boolean'),
    ],
    description ? { description } : {},
  );

const VoterField = Type.Object(
  {
    key: Type.String(),
    label: Type.String(),
    type: FieldType(),
    choices: Type.Union([Type.Array(Type.String()), Type.Null()]),
    sensitive: Type.Boolean(),
    created_at: Timestamp,
  },
  { title: 'VoterField' },
);

const CreateVoterFieldBody = Type.Object(
  {
    key: Type.String({ maxLength: 40, description: 'a-z, 0-9 and _, 1-40; not ending in _min or _max.' }),
    label: Type.String({ minLength: 1, maxLength: 100 }),
    type: FieldType('text, number, date, choice or boolean.'),
    choices: Type.Optional(
      Type.Union([Type.Array(Type.String({ maxLength: 400 }), { maxItems: 100 }), Type.Null()], {
        description: 'For a choice field: 1-100 choices.',
      }),
    ),
    sensitive: Type.Optional(
      Type.Boolean({
        default: false,
        description:
          'Caste, religion and the like: shown only to politicians and managers, left out of volunteers\u2019 reads, lists and exports without include_sensitive, and never in webhooks.',
      }),
    ),
  },
  { additionalProperties: false },
);

const UpdateVoterFieldBody = Type.Object(
  {
    label: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    choices: Type.Optional(
      Type.Union([Type.Array(Type.String({ maxLength: 400 }), { maxItems: 100 }), Type.Null()]),
    ),
    sensitive: Type.Optional(Type.Boolean()),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description: 'The key and type stay; a choice held by voters cannot be removed.',
  },
);

const JobParams = Type.Object({ job_id: IdParams.properties.id });

const KeyParams = Type.Object({ key: Type.String({ pattern: '^[a-z0-9_]{1,40}$' }) });

const TagBody = Type.Object(
  {
    add: Type.Optional(Type.Array(Type.String({ maxLength: 200 }), { maxItems: 50 })),
    remove: Type.Optional(Type.Array(Type.String({ maxLength: 200 }), { maxItems: 50 })),
    set: Type.Optional(
      Type.Object(
        {
          language: Type.Optional(
            Type.Union([Type.String({ pattern: '^[A-Za-z]{2}$' }), Type.Null()], {
              description: 'A two-letter code (hi, en), or null to clear it.',
            }),
          ),
          support_level: Type.Optional(
            Type.Union([Type.Integer({ minimum: 1, maximum: 5 }), Type.Null()], {
              description: '1 (strong supporter) to 5, or null.',
            }),
          ),
          fields: Type.Optional(
            Type.Record(
              Type.String({ pattern: '^[a-z][a-z0-9_]{0,39}$' }),
              Type.Union([Type.String(), Type.Number(), Type.Boolean(), Type.Null()]),
              {
                description:
                  'Custom fields by key (null clears); a sensitive one only by a politician (403).',
              },
            ),
          ),
        },
        {
          additionalProperties: false,
          minProperties: 1,
          description:
            'Values set on every voter reached (politicians and managers; sensitive fields politicians only), as the same kind of job.',
        },
      ),
    ),
    voter_ids: Type.Optional(
      Type.Array(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }), { maxItems: TAG_IDS_MAX }),
    ),
    filters: Type.Optional(VoterFiltersSchema),
  },
  {
    additionalProperties: false,
    description: `add and/or remove tags, and set language, support_level or custom fields (\`set\`), on voter_ids (up to ${TAG_IDS_MAX}: 200 with the count changed) or on every voter the filters match (202 with a job).`,
  },
);

const TagJob = Type.Object(
  {
    id: Type.Integer(),
    status: Type.Union([
      Type.Literal('queued'),
      Type.Literal('running'),
      Type.Literal('completed'),
      Type.Literal('failed'),
    ]),
    total: Type.Integer({ description: 'Voters the filters matched when the job started.' }),
    changed: Type.Integer({ description: 'Voters whose tags the job changed so far.' }),
    add: Type.Array(Type.String()),
    remove: Type.Array(Type.String()),
    set: Type.Union(
      [
        Type.Object(
          {
            language: Type.Optional(Type.Union([Type.String(), Type.Null()])),
            support_level: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
            fields: Type.Optional(
              Type.Record(Type.String(), Type.Union([Type.String(), Type.Number(), Type.Null()])),
            ),
          },
          { title: 'VoterBulkSet' },
        ),
        Type.Null(),
      ],
      { description: 'The values the job sets; null: tags only.' },
    ),
    filters: StoredVoterFilters,
    error: Type.Union([Type.String(), Type.Null()]),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'VoterTagJob' },
);

interface VoterRecordRouteDeps {
  fields: VoterFieldsService;
  tagging: VoterTagging;
}

const tags = ['Voters'];

const manage = { permission: 'voter_fields:manage' as const };

/** `/api/voter-fields` (custom fields) and `/api/voters/tags` (bulk tagging). */
export const voterRecordRoutes: FastifyPluginAsyncTypebox<VoterRecordRouteDeps> = async (app, deps) => {
  for (const routes of [voterFieldRoutes, voterTaggingRoutes]) await routes(app, deps);
};

const voterFieldRoutes: FastifyPluginAsyncTypebox<VoterRecordRouteDeps> = async (app, { fields }) => {
  app.get(
    '/voter-fields',
    {
      config: { permission: 'authenticated' },
      schema: {
        tags,
        summary: "The workspace's custom voter fields, in key order",
        response: { 200: Success(Type.Array(VoterField)) },
      },
    },
    async (request) => ({ success: true as const, data: await fields.list(authOf(request).workspaceId) }),
  );

  app.post(
    '/voter-fields',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Add a custom voter field (at most 100 a workspace)',
        body: CreateVoterFieldBody,
        response: { 201: Success(VoterField) },
      },
    },
    async (request, reply) => {
      const data = await fields.create(authOf(request).workspaceId, actorOf(request), request.body);
      return reply.code(201).send({ success: true, message: 'Field added.', data });
    },
  );

  app.patch(
    '/voter-fields/:key',
    {
      config: manage,
      schema: {
        tags,
        summary: "Change a custom field's label, choices or sensitivity",
        params: KeyParams,
        body: UpdateVoterFieldBody,
        response: { 200: Success(VoterField) },
      },
    },
    async (request) => {
      const data = await fields.update(
        authOf(request).workspaceId,
        actorOf(request),
        request.params.key,
        request.body,
      );
      return { success: true as const, message: 'Field updated.', data };
    },
  );

  app.delete(
    '/voter-fields/:key',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Delete a custom field and every voter\u2019s value of it',
        params: KeyParams,
        response: { 200: Done },
      },
    },
    async (request) => {
      await fields.remove(authOf(request).workspaceId, actorOf(request), request.params.key);
      return { success: true as const, message: 'Field deleted.' };
    },
  );
};

const voterTaggingRoutes: FastifyPluginAsyncTypebox<VoterRecordRouteDeps> = async (app, { tagging }) => {
  app.post(
    '/voters/tags',
    {
      config: { permission: 'voters:tag' },
      schema: {
        tags,
        summary: 'Add and remove tags, and set language, support level or fields, on many voters',
        body: TagBody,
        response: {
          200: Success(Type.Object({ changed: Type.Integer() }, { title: 'VotersTagged' })),
          202: Success(TagJob),
        },
      },
    },
    async (request, reply) => {
      const auth = authOf(request);
      const result = await tagging.tag(auth.workspaceId, actorOf(request), request.body, auth.role);
      if (result.job)
        return reply
          .code(202)
          .send({ success: true, message: 'Tagging started; follow it at its job.', data: result.job });
      return reply
        .code(200)
        .send({ success: true, message: 'Voters tagged.', data: { changed: result.changed! } });
    },
  );

  app.get(
    '/voters/tags/jobs/:job_id',
    {
      config: { permission: 'voters:tag' },
      schema: { tags, summary: 'A bulk tagging job', params: JobParams, response: { 200: Success(TagJob) } },
    },
    async (request) => ({
      success: true as const,
      data: await tagging.job(authOf(request).workspaceId, request.params.job_id),
    }),
  );
};
