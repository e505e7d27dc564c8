import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Kysely } from 'kysely';
import { Type } from 'typebox';
import type { Database } from '../../db/schema.ts';
import { messageChannels, type MessageChannel } from '../../domain.ts';
import { authOf } from '../../http/guard.ts';
import { Success, Timestamp, Ref } from '../../http/schemas.ts';
import { actorOf } from '../audit/audit.repository.ts';
import { type RetentionKey, retentionKeys, WorkspacesService } from './workspaces.service.ts';

const Carrier = Type.Object(
  {
    provider: Type.String({
      description: 'The provider that carries the channel now (`sandbox`: nothing reaches anyone).',
    }),
    channel_account_id: Type.Union([Ref('cha'), Type.Null()], {
      description: "null: the deployment's provider.",
    }),
    simulated: Type.Boolean({
      description:
        'true where the carrier is the sandbox: messages are simulated and reach no phone or inbox.',
    }),
    active: Type.Boolean({
      description:
        "false: the channel's default account is switched off, or its accounts have no default (sends and campaigns are 422 until the office switches it on or names another default; nothing moves to another account by itself).",
    }),
    templates_only: Type.Boolean({
      description:
        'true where its carrier sends templates only: SMS through a gateway of registered DLT templates, any SMS ' +
        'while DLT_ENFORCE is on, WhatsApp through a real provider (outside the 24-hour window a session opens ' +
        'only with an approved template). Replies and survey questions there go as templates (`{ template_id, variables }`).',
    }),
  },
  { title: 'ChannelCarrier' },
);

const RetentionDays = Type.Union([Type.Integer({ minimum: 1, maximum: 36500 }), Type.Null()]);
const retentionDescriptions: Record<RetentionKey, string> = {
  messages_days: 'Messages sent (their rows: bodies, addresses, statuses).',
  inbound_days: 'Replies received.',
  visits_days: "Field visits (a visit's outcome and notes).",
  survey_responses_days: 'Survey responses and their answers.',
};
const Retention = Type.Object(
  Object.fromEntries(
    retentionKeys.map((key) => [
      key,
      Type.Union([Type.Integer(), Type.Null()], { description: retentionDescriptions[key] }),
    ]),
  ) as Record<
    RetentionKey,
    ReturnType<typeof Type.Union<[ReturnType<typeof Type.Integer>, ReturnType<typeof Type.Null>]>>
  >,
  {
    title: 'Retention',
    description:
      'Days each kind of row is kept (null: forever). A chore deletes older rows daily, in chunks. Audit entries are kept at least 365 days whatever the setting (AUDIT_RETENTION_DAYS).',
  },
);
const RetentionChange = Type.Object(
  Object.fromEntries(retentionKeys.map((key) => [key, Type.Optional(RetentionDays)])) as Record<
    RetentionKey,
    ReturnType<typeof Type.Optional<typeof RetentionDays>>
  >,
  { additionalProperties: false, description: 'Days to keep each kind of row, 1-36500; null keeps forever.' },
);

const UpdateWorkspaceBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    timezone: Type.Optional(
      Type.Union([Type.String({ minLength: 1, maxLength: 64 }), Type.Null()], {
        description: 'An IANA time zone such as Asia/Kolkata; null: the deployment default (QUIET_HOURS_TZ).',
      }),
    ),
    default_language: Type.Optional(
      Type.Union([Type.Literal('en'), Type.Literal('hi')], {
        description:
          'The language of a voter without one (a roll has none): surveys ask them in it, and the unsubscribe page speaks it.',
      }),
    ),
    retention: Type.Optional(RetentionChange),
  },
  { additionalProperties: false, minProperties: 1 },
);

const Workspace = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    created_at: Timestamp,
    timezone: Type.String({
      description:
        "The IANA time zone the console shows times in: the workspace's own (`PATCH /api/workspace`), else the deployment's QUIET_HOURS_TZ. Times in answers stay UTC.",
    }),
    timezone_set: Type.Boolean({ description: 'false: the zone is the deployment default.' }),
    default_language: Type.Union([Type.Literal('en'), Type.Literal('hi')], {
      description: 'The language of a voter without one (default `en`).',
    }),
    public_id: Type.String({
      description:
        'Random: the address of the public privacy page, `/privacy/<public_id>` (notice and request form).',
    }),
    retention: Retention,
    channels: Type.Object(
      Object.fromEntries(messageChannels.map((channel) => [channel, Carrier])) as Record<
        MessageChannel,
        typeof Carrier
      >,
      { description: 'What carries each channel now.' },
    ),
  },
  { title: 'Workspace' },
);

/** `GET/PATCH /api/workspace`: the caller's workspace, its time zone, and what carries each of its channels now. */
export const workspacesRoutes: FastifyPluginAsyncTypebox<{
  db: Kysely<Database>;
  /** The deployment's provider of each channel (its name), for channels the workspace has no account for. */
  deployment: Record<MessageChannel, string>;
  /** QUIET_HOURS_TZ: the zone of a workspace that sets none. */
  defaultTimeZone: string;
  dltEnforce: boolean;
}> = async (app, { db, deployment, defaultTimeZone, dltEnforce }) => {
  const workspaces = new WorkspacesService({ db, deployment, defaultTimeZone, dltEnforce });

  app.get(
    '/workspace',
    {
      config: { permission: 'authenticated' },
      schema: {
        tags: ['Users'],
        summary: 'Your workspace, its time zone, and which provider carries each channel',
        description:
          "Each channel: its default channel account (`active: false` when that account is switched off: sends are 422, nothing moves to another account), else the deployment's provider. `simulated: true` is the sandbox: messages on that channel reach nobody.",
        response: { 200: Success(Workspace) },
      },
    },
    async (request) => ({ success: true as const, data: await workspaces.view(authOf(request).workspaceId) }),
  );

  app.patch(
    '/workspace',
    {
      config: { permission: 'workspace:manage' },
      schema: {
        tags: ['Users'],
        summary: "Change the workspace's name, time zone, default language or retention",
        body: UpdateWorkspaceBody,
        response: { 200: Success(Workspace) },
      },
    },
    async (request) => {
      const { workspaceId } = authOf(request);
      const data = await workspaces.change(workspaceId, actorOf(request), request.body);
      return { success: true as const, message: 'Workspace updated.', data };
    },
  );
};
