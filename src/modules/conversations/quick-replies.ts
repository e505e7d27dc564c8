import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Kysely } from 'kysely';
import { Type } from 'typebox';
import { nowIso } from '../../db/connect.ts';
import { pageOf } from '../../db/paginate.ts';
import type { Database, QuickReplyRow } from '../../db/schema.ts';
import { notFound, validationError } from '../../errors.ts';
import { authOf } from '../../http/guard.ts';
import { Done, Page, PageQuery, Success, Timestamp, RefInput, Ref } from '../../http/schemas.ts';
import { pageResult } from '../../domain.ts';
import { actorOf, recordAudit } from '../audit/audit.repository.ts';
import { parseRef } from '../../refs.ts';

const quickReplyRef = (id: number) => `qr_${id}`;

const QuickReply = Type.Object(
  {
    id: Ref('qr'),
    title: Type.String(),
    body: Type.String(),
    language: Type.String(),
    created_at: Timestamp,
  },
  { title: 'QuickReply' },
);
const fields = {
  title: Type.String({ minLength: 1, maxLength: 200 }),
  body: Type.String({
    minLength: 1,
    maxLength: 2000,
    description: 'The text a member sends with one click.',
  }),
  language: Type.String({ minLength: 1, maxLength: 20, description: 'e.g. en, hi (default en).' }),
};
const Params = Type.Object({ id: RefInput('qr') });

function view(row: QuickReplyRow) {
  return {
    id: quickReplyRef(row.id),
    title: row.title,
    body: row.body,
    language: row.language,
    created_at: row.created_at,
  };
}

/** A quick reply of the workspace, or 404. */
async function findQuickReply(db: Kysely<Database>, workspaceId: number, ref: string) {
  const id = parseRef('qr', ref);
  const row =
    id === undefined
      ? undefined
      : await db
          .selectFrom('quick_replies')
          .selectAll()
          .where('workspace_id', '=', workspaceId)
          .where('id', '=', id)
          .executeTakeFirst();
  if (!row) throw notFound('Quick reply');
  return row;
}

/** 422 for a title or body of blanks. */
function refuseBlank(body: { title?: string; body?: string }) {
  const errors: Record<string, string[]> = {};
  if (body.title !== undefined && body.title.trim() === '') errors.title = ['must not be empty.'];
  if (body.body !== undefined && body.body.trim() === '') errors.body = ['must not be empty.'];
  if (Object.keys(errors).length > 0) throw validationError(errors);
}

interface QuickRepliesRouteDeps {
  db: Kysely<Database>;
}

const tags = ['Conversations'];

const read = { permission: 'conversations:handle' as const };

const manage = { permission: 'quick_replies:manage' as const };

/**
 * Canned replies for conversations: every member reads them; politicians and managers create, change and
 * delete them. Small enough to live in one file (service and routes).
 */
export const quickRepliesRoutes: FastifyPluginAsyncTypebox<QuickRepliesRouteDeps> = async (app, deps) => {
  for (const routes of [quickReplyCreationRoutes, quickReplyChangingRoutes]) await routes(app, deps);
};

const quickReplyCreationRoutes: FastifyPluginAsyncTypebox<QuickRepliesRouteDeps> = async (app, { db }) => {
  app.get(
    '/quick-replies',
    {
      config: read,
      schema: {
        tags,
        summary: 'List quick replies',
        querystring: PageQuery,
        response: { 200: Success(Page(QuickReply)) },
      },
    },
    async (request) => {
      const { page, per_page } = request.query;
      const { rows, total } = await pageOf(
        db.selectFrom('quick_replies').where('workspace_id', '=', authOf(request).workspaceId),
        (q) => q.selectAll().orderBy('title').orderBy('id'),
        page,
        per_page,
      );
      return { success: true as const, data: pageResult(rows.map(view), total, page, per_page) };
    },
  );

  app.post(
    '/quick-replies',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Create a quick reply',
        body: Type.Object(
          { title: fields.title, body: fields.body, language: Type.Optional(fields.language) },
          { additionalProperties: false },
        ),
        response: { 201: Success(QuickReply) },
      },
    },
    async (request, reply) => {
      refuseBlank(request.body);
      const { workspaceId } = authOf(request);
      const now = nowIso();
      const row = await db.transaction().execute(async (trx) => {
        const row = await trx
          .insertInto('quick_replies')
          .values({
            workspace_id: workspaceId,
            title: request.body.title.trim(),
            body: request.body.body,
            language: request.body.language?.trim() || 'en',
            created_at: now,
            updated_at: now,
          })
          .returningAll()
          .executeTakeFirstOrThrow();
        await recordAudit(trx, {
          workspaceId,
          actor: actorOf(request),
          action: 'quick_reply.created',
          target: { type: 'quick_reply', id: quickReplyRef(row.id) },
          details: { title: row.title },
        });
        return row;
      });
      return reply.code(201).send({ success: true, message: 'Quick reply created.', data: view(row) });
    },
  );
};

const quickReplyChangingRoutes: FastifyPluginAsyncTypebox<QuickRepliesRouteDeps> = async (app, { db }) => {
  app.patch(
    '/quick-replies/:id',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Change a quick reply',
        params: Params,
        body: Type.Object(
          {
            title: Type.Optional(fields.title),
            body: Type.Optional(fields.body),
            language: Type.Optional(fields.language),
          },
          { additionalProperties: false, minProperties: 1 },
        ),
        response: { 200: Success(QuickReply) },
      },
    },
    async (request) => {
      refuseBlank(request.body);
      const { workspaceId } = authOf(request);
      const existing = await findQuickReply(db, workspaceId, request.params.id);
      const row = await db
        .updateTable('quick_replies')
        .set({
          ...(request.body.title !== undefined ? { title: request.body.title.trim() } : {}),
          ...(request.body.body !== undefined ? { body: request.body.body } : {}),
          ...(request.body.language !== undefined ? { language: request.body.language.trim() } : {}),
          updated_at: nowIso(),
        })
        .where('id', '=', existing.id)
        .where('workspace_id', '=', workspaceId)
        .returningAll()
        .executeTakeFirstOrThrow();
      return { success: true as const, message: 'Quick reply updated.', data: view(row) };
    },
  );

  app.delete(
    '/quick-replies/:id',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Delete a quick reply',
        params: Params,
        response: { 200: Done },
      },
    },
    async (request) => {
      const { workspaceId } = authOf(request);
      const existing = await findQuickReply(db, workspaceId, request.params.id);
      await db.transaction().execute(async (trx) => {
        await trx
          .deleteFrom('quick_replies')
          .where('id', '=', existing.id)
          .where('workspace_id', '=', workspaceId)
          .execute();
        await recordAudit(trx, {
          workspaceId,
          actor: actorOf(request),
          action: 'quick_reply.deleted',
          target: { type: 'quick_reply', id: quickReplyRef(existing.id) },
          details: { title: existing.title },
        });
      });
      return { success: true as const, message: 'Quick reply deleted.' };
    },
  );
};
