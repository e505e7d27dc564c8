import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { actorOf } from '../audit/audit.repository.ts';
import { authOf } from '../../http/guard.ts';
import { Type } from 'typebox';
import { Done, Page, Success } from '../../http/schemas.ts';
import type { MessagesService } from '../messages/messages.service.ts';
import {
  ChannelAccountItem,
  ChannelAccountParams,
  ChannelLogEntry,
  ChannelLogQuery,
  CreateChannelAccountBody,
  describeProviders,
  ListChannelAccountsQuery,
  ProviderDescription,
  TestSendBody,
  TestSendResult,
  UpdateChannelAccountBody,
} from './channel-accounts.schemas.ts';
import type { ChannelAccountsService } from './channel-accounts.service.ts';
import { validationError } from '../../errors.ts';
import { sendsTemplatesOnly } from '../../providers/adapter.ts';
import { adapterNamed } from '../../providers/registry.ts';

const TEST_TEXT = 'A test message from the Campaign Engagement Service: this channel account works.';

interface ChannelAccountsRouteDeps {
  accounts: ChannelAccountsService;
  messages: MessagesService;
}

const tags = ['Channel accounts'];

const config = { permission: 'channels:manage' as const };

/** `/api/channel-accounts`: the workspace's own provider accounts (politicians only). */
export const channelAccountsRoutes: FastifyPluginAsyncTypebox<ChannelAccountsRouteDeps> = async (
  app,
  deps,
) => {
  for (const routes of [accountReadingRoutes, accountChangingRoutes, accountTestRoutes])
    await routes(app, deps);
};

const accountReadingRoutes: FastifyPluginAsyncTypebox<ChannelAccountsRouteDeps> = async (
  app,
  { accounts },
) => {
  app.post(
    '/channel-accounts',
    {
      config,
      schema: {
        tags,
        summary: 'Add a channel account (a provider account of this workspace)',
        description:
          'Credentials are encrypted at rest and never returned. A missing or malformed setting or credential is a 422 ' +
          'naming it; credentials are first tried with the provider by a message or a test send.',
        body: CreateChannelAccountBody,
        response: { 201: Success(ChannelAccountItem) },
      },
    },
    async (request, reply) => {
      const auth = authOf(request);
      const data = await accounts.create(auth.workspaceId, actorOf(request), request.body);
      return reply.code(201).send({ success: true, message: 'Channel account created.', data });
    },
  );

  app.get(
    '/channel-accounts',
    {
      config,
      schema: {
        tags,
        summary: 'List the channel accounts, oldest first',
        querystring: ListChannelAccountsQuery,
        response: { 200: Success(Page(ChannelAccountItem)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await accounts.list(authOf(request).workspaceId, request.query),
    }),
  );

  app.get(
    '/channel-accounts/providers',
    {
      // A description of the service, not of the workspace: every member may read it (the template form uses it).
      config: { permission: 'authenticated' as const },
      schema: {
        tags,
        summary: 'The providers an account can be of: their channels, settings, credentials and callbacks',
        description:
          "Each provider's settings and credentials as fields (name, type, required, the channels that need it): " +
          "what POST and PATCH /api/channel-accounts check, and what the console's form shows.",
        response: { 200: Success(Type.Array(ProviderDescription)) },
      },
    },
    async () => ({ success: true as const, data: describeProviders() }),
  );

  app.get(
    '/channel-accounts/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Read a channel account (with its callback URLs)',
        params: ChannelAccountParams,
        response: { 200: Success(ChannelAccountItem) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await accounts.get(authOf(request).workspaceId, request.params.id),
    }),
  );
};

const accountChangingRoutes: FastifyPluginAsyncTypebox<ChannelAccountsRouteDeps> = async (
  app,
  { accounts },
) => {
  app.get(
    '/channel-accounts/:id/log',
    {
      config: { permission: 'channels:log' as const },
      schema: {
        tags,
        summary: "The account's channel log: its exchanges with the provider, newest first",
        description:
          'Every call to the provider for this account (sends, test sends, survey questions) and every call of the provider ' +
          "to the account's callback URLs, redacted and cut at 4 KB a body; kept 7 days, at most 1,000 an account. " +
          'Written just after each exchange, in batches (a send never waits for it).',
        params: ChannelAccountParams,
        querystring: ChannelLogQuery,
        response: { 200: Success(Page(ChannelLogEntry)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await accounts.log(authOf(request).workspaceId, request.params.id, request.query),
    }),
  );

  app.patch(
    '/channel-accounts/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Change a channel account',
        description:
          "`settings` and `credentials` merge into the account's; `default_for` moves the default of those channels " +
          'here; `active: true` switches an account back on (after its credentials were refused, say); ' +
          '`rotate_callback_token: true` changes the secret in its callback URLs.',
        params: ChannelAccountParams,
        body: UpdateChannelAccountBody,
        response: { 200: Success(ChannelAccountItem) },
      },
    },
    async (request) => ({
      success: true as const,
      message: 'Channel account updated.',
      data: await accounts.update(
        authOf(request).workspaceId,
        actorOf(request),
        request.params.id,
        request.body,
      ),
    }),
  );

  app.delete(
    '/channel-accounts/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Delete a channel account',
        description:
          'Messages still queued for it fail (refunded) when their turn comes; its callback URLs stop working.',
        params: ChannelAccountParams,
        response: { 200: Done },
      },
    },
    async (request) => {
      await accounts.remove(authOf(request).workspaceId, actorOf(request), request.params.id);
      return { success: true as const, message: 'Channel account deleted.' };
    },
  );
};

const accountTestRoutes: FastifyPluginAsyncTypebox<ChannelAccountsRouteDeps> = async (
  app,
  { accounts, messages },
) => {
  app.post(
    '/channel-accounts/:id/test',
    {
      config,
      schema: {
        tags,
        summary: 'Send one short test message through the account',
        description:
          "On `channel` (default the account's first). Through a provider that sends only its own templates, and on WhatsApp (a conversation opens only with an approved template), give a `tpl_` " +
          'template with provider_template_ids.<provider>. Costs one credit of the channel, like any send. A refusal is ' +
          "422 `provider_rejected` with the provider's code and text in `details`.",
        params: ChannelAccountParams,
        body: TestSendBody,
        response: { 200: Success(TestSendResult) },
      },
    },
    async (request) => {
      const workspaceId = authOf(request).workspaceId;
      const account = await accounts.get(workspaceId, request.params.id);
      const channel = request.body.channel ?? account.channels[0]!;
      // A gateway that opens a conversation only with a template refuses the free-text test (WhatsApp: Meta's
      // 131047): the test is a template there, or it would fail at the provider (contract, fifth part).
      if (
        request.body.template_id === undefined &&
        channel === 'whatsapp' &&
        sendsTemplatesOnly(adapterNamed(account.provider), channel, false)
      )
        throw validationError({
          template_id: [
            `is required: ${adapterNamed(account.provider).label} opens a WhatsApp conversation only with an approved template; choose one (tpl_<n> with its id at the provider) to test with.`,
          ],
        });
      const sent = await messages.send(
        workspaceId,
        {
          channel,
          to: request.body.to,
          ...(request.body.template_id !== undefined
            ? { template_id: request.body.template_id }
            : { message: TEST_TEXT, ...(channel === 'email' ? { subject: 'Test message' } : {}) }),
          channel_account_id: account.id,
        },
        { test: true },
      );
      return {
        success: true as const,
        message: `${account.provider} accepted the test message.`,
        data: {
          id: sent.id,
          channel: sent.channel,
          to: sent.to,
          provider: sent.provider,
          provider_message_id: sent.provider_message_id,
        },
      };
    },
  );
};
