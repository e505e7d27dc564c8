import { type TSchema, Type } from 'typebox';
import { type ErrorCode, errorStatus } from '../errors.ts';
import { refInputPattern, refPattern } from '../refs.ts';

/** Schemas every module shares: the two envelopes, the page envelope and its query. */

export const ErrorEnvelope = Type.Object(
  {
    success: Type.Literal(false),
    error_code: Type.Enum(Object.keys(errorStatus) as ErrorCode[], {
      title: 'ErrorCode',
      description: 'Machine-readable: what went wrong. Each belongs to one HTTP status (see the responses).',
    }),
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

/** A named schema's title (the model name in the OpenAPI document's components), if it has one. */
function titleOf(schema: TSchema): string | undefined {
  const title = (schema as { title?: unknown }).title;
  return typeof title === 'string' ? title : undefined;
}

/** The success envelope; around a named model it is named too (`VoterResponse`). */
export function Success<T extends TSchema>(data: T, description?: string) {
  const named = titleOf(data);
  return Type.Object(
    { success: Type.Literal(true), message: Type.Optional(Type.String()), data },
    description ? { description } : named ? { title: `${named}Response` } : {},
  );
}

/** A page of a list; of a named model it is named too (`CampaignPage`). */
export function Page<T extends TSchema>(item: T) {
  const named = titleOf(item);
  return Type.Object(
    {
      data: Type.Array(item),
      current_page: Type.Integer(),
      per_page: Type.Integer(),
      total: Type.Integer(),
      last_page: Type.Integer(),
    },
    named ? { title: `${named}Page` } : {},
  );
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

/** The pattern of a row's id as the API writes it: `<prefix>_<n>`. */
/** A value or null. */
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** A row's id in an answer, `<prefix>_<n>`. */
export function Ref(prefix: string, description = `\`${prefix}_<n>\``) {
  return Type.String({ pattern: refPattern(prefix), description });
}

/**
 * A row's id sent by a client: `<prefix>_<n>`, or just `<n>` (spaces around it are ignored), as parseRef reads
 * it. `x-id` carries the prefix to the validator's message ("must be an id such as msg_12.").
 */
export function RefInput(prefix: string, description = `\`${prefix}_<n>\` (or just \`<n>\`).`) {
  return Type.String({ maxLength: 40, pattern: refInputPattern(prefix), 'x-id': prefix, description });
}

/** A date filter: an ISO 8601 date (its whole UTC day) or a date-time with its zone (that instant). */
export function DateOrDateTime(description: string) {
  return Type.Union(
    [Type.String({ format: 'date', maxLength: 10 }), Type.String({ format: 'date-time', maxLength: 40 })],
    { description },
  );
}

/** The answer of an action that returns nothing but its message (a delete, a logout). */
export const Done = Type.Object({ success: Type.Literal(true), message: Type.String() }, { title: 'Done' });

/**
 * A schema's `patternProperties`, kept again under this key: the OpenAPI generator turns patternProperties into an
 * open `additionalProperties`, and the document puts them back (the service refuses any other key).
 */
export const PATTERNS = 'x-pattern-properties';
