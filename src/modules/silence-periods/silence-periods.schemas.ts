import { Type } from 'typebox';
import { PageQuery, RowId, Timestamp } from '../../http/schemas.ts';

export const SilencePeriodItem = Type.Object(
  {
    id: RowId,
    constituency: Type.String(),
    starts_at: Timestamp,
    ends_at: Timestamp,
    reason: Type.Union([Type.String(), Type.Null()]),
    created_at: Timestamp,
  },
  { title: 'SilencePeriod' },
);

export const CreateSilencePeriodBody = Type.Object(
  {
    constituency: Type.String({
      minLength: 1,
      maxLength: 120,
      description: "Matched case-insensitively against voters' constituency.",
    }),
    starts_at: Type.String({
      format: 'date-time',
      maxLength: 40,
      description: 'ISO 8601 date-time with a zone, e.g. 2026-12-01T17:00:00+05:30.',
    }),
    ends_at: Type.String({
      format: 'date-time',
      maxLength: 40,
      description: 'ISO 8601 date-time with a zone, after starts_at.',
    }),
    reason: Type.Optional(Type.String({ maxLength: 500 })),
  },
  { additionalProperties: false },
);

export const ListSilencePeriodsQuery = Type.Object({
  ...PageQuery.properties,
  constituency: Type.Optional(
    Type.String({ minLength: 1, maxLength: 120, description: 'Case-insensitive.' }),
  ),
});
