import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Kysely } from 'kysely';
import { type Static, Type } from 'typebox';
import type { Database } from '../../db/schema.ts';
import { messageChannels, type MessageChannel } from '../../domain.ts';
import { type FieldErrors, notFound, validationError } from '../../errors.ts';
import { authOf } from '../../http/guard.ts';
import { Success, Timestamp } from '../../http/schemas.ts';
import { isSimulated } from '../../providers/registry.ts';
import { isTimeZone } from '../../lib/quiet-hours.ts';
import { actorOf, recordAudit } from '../audit/audit.repository.ts';
import { updateWorkspace, workspaceById } from './workspaces.repository.ts';
import { accountsOfWorkspace } from '../channel-accounts/channel-accounts.repository.ts';
import { carrierAmong } from '../channel-accounts/channel-accounts.service.ts';
import { accountRef } from '../channel-accounts/channel-accounts.rules.ts';

const Carrier = Type.Object(
  {
    provider: Type.String({
      description: 'The provider that carries the channel now (`sandbox`: nothing reaches anyone).',
    }),
    channel_account_id: Type.Union([Type.String(), Type.Null()], {
      description: "null: the deployment's provider.",
    }),
    simulated: Type.Boolean({
      description:
        'true where the carrier is the sandbox: messages are simulated and reach no phone or inbox.',
    }),
    active: Type.Boolean({
      description: "false: the workspace's accounts for it are all switched off (sends are 422).",
    }),
  },
  { title: 'ChannelCarrier' },
);

const UpdateWorkspaceBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    timezone: Type.Optional(
      Type.Union([Type.String({ minLength: 1, maxLength: 64 }), Type.Null()], {
        description: 'An IANA time zone such as Asia/Kolkata; null: the deployment default (QUIET_HOURS_TZ).',
      }),
    ),
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
}> = async (app, { db, deployment, defaultTimeZone }) => {
  /** The workspace as the routes answer it: one read of it and one of its accounts. */
  async function view(workspaceId: number) {
    const row = await workspaceById(db, workspaceId);
    if (!row) throw notFound('Workspace');
    const channels = {} as Record<MessageChannel, Static<typeof Carrier>>;
    const accounts = await accountsOfWorkspace(db, workspaceId);
    for (const channel of messageChannels) {
      const { account, off } = carrierAmong(accounts, channel);
      const carrier = account ?? off;
      const provider = carrier ? carrier.provider : deployment[channel];
      channels[channel] = {
        provider,
        channel_account_id: carrier ? accountRef(carrier.id) : null,
        simulated: isSimulated(provider) && !off,
        active: off === undefined,
      };
    }
    return {
      id: Number(row.id),
      name: row.name,
      created_at: row.created_at,
      timezone: row.timezone ?? defaultTimeZone,
      timezone_set: row.timezone !== null,
      channels,
    };
  }

  app.get(
    '/workspace',
    {
      config: { permission: 'authenticated' },
      schema: {
        tags: ['Users'],
        summary: 'Your workspace, its time zone, and which provider carries each channel',
        description:
          "Each channel: its default active channel account, else its first active one, else the deployment's provider. `simulated: true` is the sandbox: messages on that channel reach nobody.",
        response: { 200: Success(Workspace) },
      },
    },
    async (request) => ({ success: true as const, data: await view(authOf(request).workspaceId) }),
  );

  app.patch(
    '/workspace',
    {
      config: { permission: 'workspace:manage' },
      schema: {
        tags: ['Users'],
        summary: "Change the workspace's name or time zone",
        body: UpdateWorkspaceBody,
        response: { 200: Success(Workspace) },
      },
    },
    async (request) => {
      const { workspaceId } = authOf(request);
      const { name, timezone } = request.body;
      const errors: FieldErrors = {};
      if (name !== undefined && name.trim() === '') errors.name = ['must not be empty.'];
      if (typeof timezone === 'string' && !isTimeZone(timezone))
        errors.timezone = [`is "${timezone}", not an IANA time zone: use a name such as Asia/Kolkata.`];
      if (Object.keys(errors).length > 0) throw validationError(errors);
      await db.transaction().execute(async (trx) => {
        await updateWorkspace(trx, workspaceId, {
          ...(name !== undefined ? { name: name.trim() } : {}),
          ...(timezone !== undefined ? { timezone } : {}),
        });
        await recordAudit(trx, {
          workspaceId,
          actor: actorOf(request),
          action: 'workspace.updated',
          target: { type: 'workspace', id: workspaceId },
          details: { changed: Object.keys(request.body), ...(timezone !== undefined ? { timezone } : {}) },
        });
      });
      return { success: true as const, message: 'Workspace updated.', data: await view(workspaceId) };
    },
  );
};
