import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Kysely } from 'kysely';
import { type Static, Type } from 'typebox';
import type { Database } from '../../db/schema.ts';
import { messageChannels, type MessageChannel } from '../../domain.ts';
import { notFound } from '../../errors.ts';
import { authOf } from '../../http/guard.ts';
import { Success, Timestamp } from '../../http/schemas.ts';
import { isSimulated } from '../../providers/registry.ts';
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

const Workspace = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    created_at: Timestamp,
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

/** `GET /api/workspace`: the caller's workspace, and what carries each of its channels now. */
export const workspacesRoutes: FastifyPluginAsyncTypebox<{
  db: Kysely<Database>;
  /** The deployment's provider of each channel (its name), for channels the workspace has no account for. */
  deployment: Record<MessageChannel, string>;
}> = async (app, { db, deployment }) => {
  app.get(
    '/workspace',
    {
      config: { permission: 'authenticated' },
      schema: {
        tags: ['Users'],
        summary: 'Your workspace, and which provider carries each channel',
        description:
          "Each channel: its default active channel account, else its first active one, else the deployment's provider. `simulated: true` is the sandbox: messages on that channel reach nobody.",
        response: { 200: Success(Workspace) },
      },
    },
    async (request) => {
      const { workspaceId } = authOf(request);
      const row = await db
        .selectFrom('workspaces')
        .select(['id', 'name', 'created_at'])
        .where('id', '=', workspaceId)
        .executeTakeFirst();
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
        success: true as const,
        data: { id: Number(row.id), name: row.name, created_at: row.created_at, channels },
      };
    },
  );
};
