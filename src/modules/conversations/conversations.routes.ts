import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { actorOf } from '../audit/audit.repository.ts';
import { authOf } from '../../http/guard.ts';
import { Page, PageQuery, Success, Timestamp, RefInput } from '../../http/schemas.ts';
import { Grievance } from '../grievances/grievances.schemas.ts';
import { ChannelSchema, MessageText, SendResult } from '../messages/messages.schemas.ts';
import { Conversation, ConversationDetail } from './conversations.schemas.ts';
import type { ConversationsService } from './conversations.service.ts';

const ThreadMessage = Type.Object(
  {
    id: Type.String({
      pattern: '^(in|msg)_[0-9]{1,15}$',
      description: '`in_<n>` (inbound) or `msg_<n>` (outbound)',
    }),
    direction: Type.Union([Type.Literal('inbound'), Type.Literal('outbound')]),
    body: Type.String(),
    keyword: Type.Optional(
      Type.Union([Type.Literal('stop'), Type.Literal('start'), Type.Null()], {
        description:
          'Inbound: the consent keyword it was read as (STOP opted the contact out; START back in).',
      }),
    ),
    status: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 'Outbound: its status.' })),
    error_code: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    sent_by: Type.Optional(
      Type.Union([Type.Integer(), Type.Null()], {
        description: 'Outbound: the user who sent it; null for campaigns.',
      }),
    ),
    channel_account_id: Type.Optional(Type.Union([RefInput('cha'), Type.Null()])),
    withheld: Type.Optional(
      Type.Boolean({
        description:
          "Inbound: true for a voter's answer to a survey question that saves to support_level or a sensitive field; a volunteer gets it without its body.",
      }),
    ),
    created_at: Timestamp,
  },
  { title: 'ConversationMessage' },
);

const Params = Type.Object({ id: RefInput('conv') });

const ListQuery = Type.Object({
  ...PageQuery.properties,
  status: Type.Optional(Type.Union([Type.Literal('open'), Type.Literal('closed')])),
  assigned_to: Type.Optional(Type.String({ maxLength: 20, description: '`me`, `none` or a user id.' })),
  channel: Type.Optional(ChannelSchema),
  unread: Type.Optional(Type.Boolean({ description: 'true: only those with unread messages.' })),
  ward: Type.Optional(Type.String({ maxLength: 200, description: "Of the contact's voter." })),
  booth: Type.Optional(Type.String({ maxLength: 200 })),
  constituency: Type.Optional(Type.String({ maxLength: 200 })),
  voter_id: Type.Optional(
    Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: "The contact's voter." }),
  ),
  search: Type.Optional(
    Type.String({ maxLength: 200, description: "Part of the contact's name or address." }),
  ),
});

interface ConversationsRouteDeps {
  conversations: ConversationsService;
}

const tags = ['Conversations'];

const config = { permission: 'conversations:handle' as const };

/** `/api/conversations`: replies reach a person (volunteers: only the conversations assigned to them). */
export const conversationsRoutes: FastifyPluginAsyncTypebox<ConversationsRouteDeps> = async (app, deps) => {
  for (const routes of [conversationReadingRoutes, conversationReplyRoutes, conversationLinkRoutes])
    await routes(app, deps);
};

const conversationReadingRoutes: FastifyPluginAsyncTypebox<ConversationsRouteDeps> = async (
  app,
  { conversations },
) => {
  app.get(
    '/conversations',
    {
      config,
      schema: {
        tags,
        summary: 'List conversations, most recent activity first',
        description: 'A volunteer sees only the conversations assigned to them.',
        querystring: ListQuery,
        response: { 200: Success(Page(Conversation)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await conversations.list(authOf(request), request.query),
    }),
  );

  app.get(
    '/conversations/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Read a conversation, with how a reply can go now',
        params: Params,
        response: { 200: Success(ConversationDetail) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await conversations.get(authOf(request), request.params.id),
    }),
  );

  app.get(
    '/conversations/:id/messages',
    {
      config,
      schema: {
        tags,
        summary: "A conversation's messages, both directions, oldest first",
        description: 'Read by the assignee, the conversation has nothing unread.',
        params: Params,
        querystring: PageQuery,
        response: { 200: Success(Page(ThreadMessage)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await conversations.messages(
        authOf(request),
        request.params.id,
        request.query.page,
        request.query.per_page,
      ),
    }),
  );
};

const conversationReplyRoutes: FastifyPluginAsyncTypebox<ConversationsRouteDeps> = async (
  app,
  { conversations },
) => {
  app.post(
    '/conversations/:id/reply',
    {
      config,
      schema: {
        tags,
        summary: 'Reply to the contact',
        description:
          "On the conversation's channel, through the channel account the contact last wrote to (else the default); " +
          'costs credits as a send. Refused (422 on `message`) while the contact is opted out, and on WhatsApp for ' +
          'free text more than 24 hours after the contact last wrote (reply with a template). Quiet hours and silence ' +
          'periods do not hold a reply.',
        params: Params,
        body: Type.Object(
          {
            message: Type.Optional(MessageText),
            template_id: Type.Optional(RefInput('tpl', 'A `tpl_<n>` template.')),
            variables: Type.Optional(
              Type.Record(Type.String({ maxLength: 40 }), Type.String({ maxLength: 500 }), {
                maxProperties: 20,
                description: "Values for the template's variables instead of the voter's.",
              }),
            ),
          },
          { additionalProperties: false },
        ),
        response: { 201: Success(SendResult) },
      },
    },
    async (request, reply) => {
      const data = await conversations.reply(authOf(request), request.params.id, request.body);
      return reply.code(201).send({ success: true, message: 'Reply sent.', data });
    },
  );

  app.patch(
    '/conversations/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Close, reopen or assign a conversation',
        description:
          'Managers and politicians assign to any active member; a volunteer closes or reopens their own.',
        params: Params,
        body: Type.Object(
          {
            status: Type.Optional(Type.Union([Type.Literal('open'), Type.Literal('closed')])),
            assigned_to: Type.Optional(
              Type.Union([Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }), Type.Null()]),
            ),
          },
          { additionalProperties: false, minProperties: 1 },
        ),
        response: { 200: Success(Conversation) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await conversations.update(authOf(request), actorOf(request), request.params.id, request.body),
    }),
  );
};

const conversationLinkRoutes: FastifyPluginAsyncTypebox<ConversationsRouteDeps> = async (
  app,
  { conversations },
) => {
  app.post(
    '/conversations/:id/voter',
    {
      config,
      schema: {
        tags,
        summary: 'Link the conversation to a voter of the roll',
        description:
          "A complaint from a number not on the roll belongs to the voter the office finds (by EPIC, name or house). The voter's empty phone (or email) takes the contact's address; audited as `conversation.linked`. A politician or manager links any voter; the conversation's assignee, a voter of their part of the roll (422 otherwise); another volunteer 403.",
        params: Params,
        body: Type.Object(
          { voter_id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }) },
          { additionalProperties: false },
        ),
        response: { 200: Success(Conversation) },
      },
    },
    async (request) => ({
      success: true as const,
      message: 'Conversation linked to the voter.',
      data: await conversations.linkVoter(
        authOf(request),
        actorOf(request),
        request.params.id,
        request.body.voter_id,
      ),
    }),
  );

  app.post(
    '/conversations/:id/grievance',
    {
      config,
      schema: {
        tags,
        summary: 'Open a grievance from the conversation',
        description:
          "For the contact's voter (422 when there is none), described by their last message, linked to the conversation; at most one open grievance a conversation (409).",
        params: Params,
        body: Type.Object(
          {
            title: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
            category: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
            priority: Type.Optional(
              Type.Union([
                Type.Literal('low'),
                Type.Literal('normal'),
                Type.Literal('high'),
                Type.Literal('urgent'),
              ]),
            ),
          },
          { additionalProperties: false },
        ),
        response: { 201: Success(Grievance) },
      },
    },
    async (request, reply) => {
      const data = await conversations.grievance(authOf(request), request.params.id, request.body);
      return reply.code(201).send({ success: true, message: 'Grievance opened.', data });
    },
  );
};
