import { Type } from 'typebox';
import type { AuditLogRow } from '../../db/schema.ts';
import { PageQuery, RowId, Timestamp, DateOrDateTime } from '../../http/schemas.ts';
import { auditActions } from './audit.repository.ts';

export const AuditActionSchema = Type.Enum([...auditActions], {
  title: 'AuditAction',
  description: 'What was done.',
});

export const AuditEntry = Type.Object(
  {
    id: Type.Integer(),
    action: AuditActionSchema,
    actor_id: Type.Union([Type.Integer(), Type.Null()], {
      description: 'The user who acted; null for the service itself (the CLI, the worker, a provider).',
    }),
    actor_name: Type.Union([Type.String(), Type.Null()], { description: "The actor's name when it acted." }),
    target_type: Type.Union([Type.String(), Type.Null()], { description: 'e.g. user, campaign, webhook.' }),
    target_id: Type.Union([Type.String(), Type.Null()]),
    ip: Type.Union([Type.String(), Type.Null()], { description: 'Client address of the request.' }),
    details: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()], {
      description: 'What the action was given and did: changed fields, filters, row counts. Never a secret.',
    }),
    created_at: Timestamp,
  },
  { title: 'AuditEntry' },
);

export const AuditQuery = Type.Object({
  ...PageQuery.properties,
  action: Type.Optional(AuditActionSchema),
  actor_id: Type.Optional(RowId),
  date_from: Type.Optional(
    DateOrDateTime('ISO 8601 date (from its start) or date-time with its zone, inclusive.'),
  ),
  date_to: Type.Optional(DateOrDateTime('ISO 8601 date (to its end) or date-time with its zone, inclusive.')),
});

export function auditView(row: AuditLogRow) {
  return {
    id: row.id,
    action: row.action as (typeof auditActions)[number],
    actor_id: row.actor_id,
    actor_name: row.actor_name,
    target_type: row.target_type,
    target_id: row.target_id,
    ip: row.ip,
    details: row.details ? (JSON.parse(row.details) as Record<string, unknown>) : null,
    created_at: row.created_at,
  };
}
