import { type TSchema, Type } from 'typebox';

/** Schemas every module shares: the two envelopes, the page envelope and its query. */

export const ErrorEnvelope = Type.Object(
  {
    success: Type.Literal(false),
    error_code: Type.String({ description: 'Machine-readable code, e.g. validation_error, not_found.' }),
    message: Type.String({ description: 'What went wrong and what to fix, for a person.' }),
    details: Type.Optional(
      Type.Object(
        {},
        {
          additionalProperties: true,
          description:
            'Extra information. For validation_error: each offending field path mapped to a list of messages.',
        },
      ),
    ),
  },
  { title: 'Error' },
);

export function Success<T extends TSchema>(data: T, description?: string) {
  return Type.Object(
    { success: Type.Literal(true), message: Type.Optional(Type.String()), data },
    description ? { description } : {},
  );
}

export function Page<T extends TSchema>(item: T) {
  return Type.Object({
    data: Type.Array(item),
    current_page: Type.Integer(),
    per_page: Type.Integer(),
    total: Type.Integer(),
    last_page: Type.Integer(),
  });
}

/** The highest page a list takes: past any real list's end, and its offset stays an exact integer. */
export const MAX_PAGE = 1_000_000_000;

export const PageQuery = Type.Object({
  page: Type.Integer({
    minimum: 1,
    maximum: MAX_PAGE,
    default: 1,
    description: 'Page number, 1 to 1,000,000,000; a page past the end answers an empty `data`.',
  }),
  per_page: Type.Integer({ minimum: 1, maximum: 100, default: 15, description: 'Items per page, 1-100.' }),
});

/** A row id sent by a client: a positive whole number that JavaScript and the databases hold exactly. */
export const RowId = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER });

export const IdParams = Type.Object({ id: RowId });

export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC timestamp.' });

export interface PageResult<T> {
  data: T[];
  current_page: number;
  per_page: number;
  total: number;
  last_page: number;
}

export function pageResult<T>(items: T[], total: number, page: number, perPage: number): PageResult<T> {
  return {
    data: items,
    current_page: page,
    per_page: perPage,
    total,
    last_page: Math.max(1, Math.ceil(total / perPage)),
  };
}
