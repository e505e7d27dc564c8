import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { authOf } from '../../http/guard.ts';
import { Page, Success } from '../../http/schemas.ts';
import { AuditEntry, AuditQuery } from './audit.schemas.ts';
import type { AuditService } from './audit.service.ts';

/** Read-only: no route updates or deletes audit entries. */
export const auditRoutes: FastifyPluginAsyncTypebox<{ audit: AuditService }> = async (app, { audit }) => {
  app.get(
    '/audit-log',
    {
      config: { permission: 'audit:read' },
      schema: {
        tags: ['Audit log'],
        summary: 'Who did what in your workspace, newest first',
        description:
          'Every entry is written in the same transaction as its action and kept AUDIT_RETENTION_DAYS. Nobody ' +
          'can change or delete entries through the API. Filters: `action`, `actor_id`, `date_from` / `date_to` ' +
          '(ISO 8601 dates or date-times, inclusive).',
        querystring: AuditQuery,
        response: { 200: Success(Page(AuditEntry)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await audit.list(authOf(request).workspaceId, request.query),
    }),
  );
};
