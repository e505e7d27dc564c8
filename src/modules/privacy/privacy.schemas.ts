import { Type } from 'typebox';
import { privacyRequestStatuses, privacyRequestTypes, privacyRequestVias } from '../../domain.ts';
import { Nullable, PageQuery, Ref, RefInput, RowId, Timestamp } from '../../http/schemas.ts';

/** The languages a notice is written in and the public page speaks. */
export const noticeLanguages = ['en', 'hi'] as const;

export const Notice = Type.Object(
  {
    version: Type.Integer({
      description: 'Starts at 1 with the first notice; each PUT adds 1. 0: no notice written yet.',
    }),
    texts: Type.Record(Type.String(), Type.String(), {
      description: 'The notice in each language, `{ "en": "...", "hi": "..." }`.',
    }),
    contact: Type.String({ description: 'Whom a person writes to: the office, or its grievance officer.' }),
    updated_at: Nullable(Timestamp),
    public_url: Type.String({
      description: 'Where anyone reads it and makes a request: `/privacy/<public_id>` on this service.',
    }),
  },
  { title: 'PrivacyNotice' },
);

export const NoticeBody = Type.Object(
  {
    texts: Type.Object(
      {
        en: Type.String({ minLength: 1, maxLength: 20_000 }),
        hi: Type.Optional(Type.String({ minLength: 1, maxLength: 20_000 })),
      },
      {
        additionalProperties: false,
        description:
          'What is kept, why, and for how long, in English and (best) Hindi. The public page adds how to withdraw consent, ask for access, correction or erasure, and complain to the Data Protection Board.',
      },
    ),
    contact: Type.String({ minLength: 1, maxLength: 500 }),
  },
  { additionalProperties: false },
);

const RequestType = Type.Enum([...privacyRequestTypes], {
  description:
    '`access` (a copy of their data), `correction`, `erasure`, `nomination` (someone to act for them, DPDP s.14), `grievance` (a complaint to the office, s.13).',
});
const RequestStatus = Type.Enum([...privacyRequestStatuses], {
  description:
    '`open` (received), `verified` (the requester proved they hold the address: the public form, or the office checked), `completed`, `rejected`.',
});

export const PrivacyRequest = Type.Object(
  {
    id: Ref('dpr'),
    type: RequestType,
    voter_id: Nullable(Type.Integer()),
    address: Type.String({
      description:
        'The phone (E.164) or email it came from or concerns; `#<hash>` once the person is erased.',
    }),
    status: RequestStatus,
    received_via: Type.Enum([...privacyRequestVias]),
    due_at: Timestamp,
    overdue: Type.Boolean({ description: 'Not completed or rejected, and past `due_at`.' }),
    completed_at: Nullable(Timestamp),
    note: Nullable(Type.String()),
    erasure: Nullable(
      Type.Object(
        {
          erased_at: Timestamp,
          removed: Type.Object(
            {},
            { additionalProperties: Type.Integer(), description: 'Rows removed or rewritten, by kind.' },
          ),
          remaining: Type.Array(
            Type.Object({
              import_id: Type.String(),
              file: Type.String(),
              removed_by: Type.String({ description: 'When it goes.' }),
            }),
            { description: 'Stored uploads that still hold the person (an import still queued or running).' },
          ),
        },
        { description: 'What POST .../erase did.' },
      ),
    ),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'PrivacyRequest' },
);

export const RequestParams = Type.Object({ id: RefInput('dpr') });

export const CreateRequestBody = Type.Object(
  {
    type: RequestType,
    address: Type.String({
      minLength: 3,
      maxLength: 254,
      description: 'The person’s phone (a number without + is read in DEFAULT_COUNTRY) or email.',
    }),
    voter_id: Type.Optional(Nullable(RowId)),
    note: Type.Optional(Nullable(Type.String({ maxLength: 2000 }))),
    received_via: Type.Optional(
      Type.Union([Type.Literal('office'), Type.Literal('keyword')], { description: 'Default `office`.' }),
    ),
  },
  { additionalProperties: false },
);

export const UpdateRequestBody = Type.Object(
  {
    status: Type.Optional(RequestStatus),
    voter_id: Type.Optional(Nullable(RowId)),
    note: Type.Optional(Nullable(Type.String({ maxLength: 2000 }))),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const ListRequestsQuery = Type.Object(
  {
    ...PageQuery.properties,
    status: Type.Optional(RequestStatus),
    type: Type.Optional(RequestType),
    overdue: Type.Optional(Type.Boolean({ description: 'true: only overdue requests.' })),
  },
  { additionalProperties: false },
);

export const Breach = Type.Object(
  {
    id: Ref('brc'),
    detected_at: Timestamp,
    description: Type.String(),
    affected_count: Nullable(Type.Integer()),
    board_notified_at: Nullable(Timestamp),
    people_notified_at: Nullable(Timestamp),
    board_report_due: Timestamp,
    overdue: Type.Boolean({
      description: 'The Board is not yet notified and `board_report_due` (detected + 72 hours) has passed.',
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'Breach' },
);

export const BreachParams = Type.Object({ id: RefInput('brc') });

const BreachFields = {
  detected_at: Type.String({ format: 'date-time', maxLength: 40 }),
  description: Type.String({ minLength: 1, maxLength: 10_000 }),
  affected_count: Nullable(Type.Integer({ minimum: 0, maximum: 1_000_000_000 })),
  board_notified_at: Nullable(Type.String({ format: 'date-time', maxLength: 40 })),
  people_notified_at: Nullable(Type.String({ format: 'date-time', maxLength: 40 })),
};

export const CreateBreachBody = Type.Object(
  {
    detected_at: BreachFields.detected_at,
    description: BreachFields.description,
    affected_count: Type.Optional(BreachFields.affected_count),
    board_notified_at: Type.Optional(BreachFields.board_notified_at),
    people_notified_at: Type.Optional(BreachFields.people_notified_at),
  },
  { additionalProperties: false },
);

export const UpdateBreachBody = Type.Object(
  {
    detected_at: Type.Optional(BreachFields.detected_at),
    description: Type.Optional(BreachFields.description),
    affected_count: Type.Optional(BreachFields.affected_count),
    board_notified_at: Type.Optional(BreachFields.board_notified_at),
    people_notified_at: Type.Optional(BreachFields.people_notified_at),
  },
  { additionalProperties: false, minProperties: 1 },
);
