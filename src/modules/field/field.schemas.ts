import { Type } from 'typebox';
import { DateOrDateTime, Nullable, PageQuery, Ref, RefInput, RowId, Timestamp } from '../../http/schemas.ts';
import { PATTERNS } from '../../http/schemas.ts';
import { SurveyQuestion } from '../surveys/surveys.schemas.ts';
import {
  fieldFilters,
  filterFields,
  StoredVoterFilters,
  VoterFiltersSchema,
} from '../voters/voters.schemas.ts';

/** Field work on the wire: turfs, walk lists, visits, progress and poll day (the contract's fourth part). */

export const outcomes = ['met', 'not_home', 'refused', 'moved', 'deceased', 'wrong_address'] as const;
export type Outcome = (typeof outcomes)[number];

const OutcomeSchema = Type.Union([
  Type.Literal('met'),
  Type.Literal('not_home'),
  Type.Literal('refused'),
  Type.Literal('moved'),
  Type.Literal('deceased'),
  Type.Literal('wrong_address'),
]);

export const TurfParams = Type.Object({ id: RefInput('turf') });

const AssignedTo = Type.Array(RowId, {
  maxItems: 200,
  uniqueItems: true,
  description:
    "Ids of the team's members who work the turf (a volunteer sees only the turfs assigned to them).",
});

const DoorSurvey = Type.Union([RefInput('svy'), Type.Null()], {
  description: 'The survey canvassers ask at the door (its questions are in the visit form); null for none.',
});

export const CreateTurfBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    filters: VoterFiltersSchema,
    assigned_to: Type.Optional(AssignedTo),
    survey_id: Type.Optional(DoorSurvey),
  },
  { additionalProperties: false },
);

export const UpdateTurfBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    filters: Type.Optional(VoterFiltersSchema),
    assigned_to: Type.Optional(AssignedTo),
    survey_id: Type.Optional(DoorSurvey),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description: '`filters` and `assigned_to` each replace the whole of what they name.',
  },
);

export const Turf = Type.Object(
  {
    id: Ref('turf'),
    name: Type.String(),
    filters: StoredVoterFilters,
    assigned_to: Type.Array(Type.Integer()),
    voters: Type.Integer({ description: 'Voters matching the filters now.' }),
    households: Type.Integer({ description: 'Their households (same part and house number, or address).' }),
    survey: Type.Union(
      [
        Type.Object({ id: Ref('svy'), name: Type.String(), questions: Type.Array(SurveyQuestion) }),
        Type.Null(),
      ],
      {
        description:
          'The survey asked at the door, with its questions (a volunteer: without those that save a sensitive value).',
      },
    ),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'Turf' },
);

export const WalkListQuery = Type.Object({
  page: PageQuery.properties.page,
  per_page: Type.Integer({
    minimum: 1,
    maximum: 2000,
    default: 500,
    description: 'Items per page, 1-2,000.',
  }),
});

const LastVisit = Type.Union(
  [
    Type.Object({
      outcome: OutcomeSchema,
      visited_at: Timestamp,
      by: Type.Union([Type.Object({ id: Type.Integer(), name: Type.String() }), Type.Null()]),
    }),
    Type.Null(),
  ],
  { description: "The voter's latest visit, or null." },
);

export const WalkListItem = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    name_local: Nullable(Type.String()),
    epic_number: Nullable(Type.String()),
    part_number: Nullable(Type.Integer()),
    serial_number: Nullable(Type.Integer()),
    page_number: Nullable(Type.Integer()),
    house_number: Nullable(Type.String()),
    age: Nullable(Type.Integer()),
    gender: Nullable(Type.String()),
    phone: Nullable(Type.String()),
    support_level: Type.Optional(
      Nullable(Type.Integer({ description: 'Politicians and managers only (sensitive).' })),
    ),
    last_visit: LastVisit,
  },
  { title: 'WalkListItem' },
);

const Location = Type.Object(
  {
    lat: Type.Number({ minimum: -90, maximum: 90 }),
    lon: Type.Number({ minimum: -180, maximum: 180 }),
  },
  { additionalProperties: false },
);

const ClientId = Type.String({
  format: 'uuid',
  maxLength: 36,
  description: 'A UUID the device made for this record: sending it again changes nothing.',
});

export const VisitInput = Type.Object(
  {
    client_id: ClientId,
    voter_id: RowId,
    outcome: OutcomeSchema,
    support_level: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 5,
        description: '1 (strong supporter) to 5. Not from volunteers.',
      }),
    ),
    tags_add: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 40 }), { maxItems: 50 })),
    fields: Type.Optional(
      Type.Object(
        {},
        {
          additionalProperties: true,
          description: 'Custom field values `{ key: value }` (a sensitive field: not from volunteers).',
        },
      ),
    ),
    note: Type.Optional(Type.String({ maxLength: 2000 })),
    survey_id: Type.Optional(RefInput('svy')),
    answers: Type.Optional(
      Type.Object(
        {},
        {
          additionalProperties: true,
          description:
            "The survey's answers `{ question_key: value }` (a choice's key or label, a number, text): a response with channel `visit`.",
        },
      ),
    ),
    visited_at: Type.String({ format: 'date-time', maxLength: 40 }),
    location: Type.Optional(Location),
    consent: Type.Optional(
      Type.Union([Type.Literal('given'), Type.Literal('withdrawn')], {
        description:
          "The voter's consent as they gave or withdrew it at the door: recorded with source `visit` at `visited_at`, unless a newer one was recorded since.",
      }),
    ),
  },
  { additionalProperties: false, title: 'VisitInput' },
);

export const RecordVisitsBody = Type.Object(
  { visits: Type.Array(VisitInput, { minItems: 1, maxItems: 500 }) },
  { additionalProperties: false },
);

const ItemError = Type.Object({
  error_code: Type.String(),
  message: Type.String(),
  details: Type.Optional(Type.Object({}, { additionalProperties: true })),
});

const Status = Type.Union([Type.Literal('created'), Type.Literal('duplicate'), Type.Literal('rejected')]);

export const VisitOutcome = Type.Object(
  {
    client_id: Type.String(),
    id: Type.Union([Ref('vis'), Type.Null()]),
    status: Status,
    not_applied: Type.Optional(
      Type.Array(Type.String(), {
        description: 'Fields the visit did not change: they changed on the service after its visited_at.',
      }),
    ),
    error: Type.Optional(ItemError),
  },
  { title: 'VisitOutcome' },
);

export const Visit = Type.Object(
  {
    id: Ref('vis'),
    client_id: Type.String(),
    voter_id: Type.Integer(),
    user_id: Nullable(Type.Integer()),
    outcome: OutcomeSchema,
    support_level: Type.Optional(Nullable(Type.Integer())),
    tags_add: Type.Array(Type.String()),
    fields: Type.Object({}, { additionalProperties: true }),
    note: Nullable(Type.String()),
    survey_id: Nullable(Ref('svy')),
    response_id: Nullable(Ref('sres')),
    visited_at: Timestamp,
    location: Nullable(Location),
    not_applied: Type.Array(Type.String()),
    created_at: Timestamp,
  },
  { title: 'Visit' },
);

export const ListVisitsQuery = Type.Object(
  {
    ...PageQuery.properties,
    turf_id: Type.Optional(RefInput('turf')),
    user_id: Type.Optional(RowId),
    voter_id: Type.Optional(RowId),
    since: Type.Optional(DateOrDateTime('Visits made at or after this.')),
  },
  { additionalProperties: false },
);

export const TurfProgress = Type.Object(
  {
    voters: Type.Integer(),
    households: Type.Integer(),
    visited: Type.Integer({ description: 'Voters visited at least once.' }),
    met: Type.Integer({ description: 'Voters met at least once.' }),
    by_outcome: Type.Object(
      {
        met: Type.Integer(),
        not_home: Type.Integer(),
        refused: Type.Integer(),
        moved: Type.Integer(),
        deceased: Type.Integer(),
        wrong_address: Type.Integer(),
      },
      { description: "Voters by their latest visit's outcome." },
    ),
    by_support: Type.Optional(
      Type.Object(
        {
          '1': Type.Integer(),
          '2': Type.Integer(),
          '3': Type.Integer(),
          '4': Type.Integer(),
          '5': Type.Integer(),
          unknown: Type.Integer(),
        },
        { description: 'Voters by support level (politicians and managers only).' },
      ),
    ),
    by_user: Type.Array(Type.Object({ user_id: Nullable(Type.Integer()), visits: Type.Integer() })),
  },
  { title: 'TurfProgress' },
);

export const MarkInput = Type.Object(
  {
    client_id: ClientId,
    voter_id: Type.Optional(RowId),
    part_number: Type.Optional(Type.Integer({ minimum: 1, maximum: 9999 })),
    serial_number: Type.Optional(Type.Integer({ minimum: 1, maximum: 9999 })),
    voted: Type.Boolean(),
    marked_at: Type.String({ format: 'date-time', maxLength: 40 }),
  },
  {
    additionalProperties: false,
    title: 'MarkInput',
    description: 'Names the voter by `voter_id`, or by `part_number` and `serial_number` (a booth slip).',
  },
);

export const RecordMarksBody = Type.Object(
  { marks: Type.Array(MarkInput, { minItems: 1, maxItems: 500 }) },
  { additionalProperties: false },
);

export const MarkOutcome = Type.Object(
  {
    client_id: Type.String(),
    id: Type.Union([Ref('mark'), Type.Null()]),
    status: Status,
    voter_id: Type.Optional(Type.Integer()),
    error: Type.Optional(ItemError),
  },
  { title: 'MarkOutcome' },
);

export const TurnoutQuery = Type.Object(
  {
    ...filterFields,
    group_by: Type.Union([Type.Literal('booth'), Type.Literal('part_number')], { default: 'booth' }),
  },
  {
    patternProperties: fieldFilters,
    [PATTERNS]: fieldFilters,
    description: 'Voter filters narrow the voters counted (a constituency, a ward...).',
  },
);

export const Turnout = Type.Object(
  {
    data: Type.Array(
      Type.Object({
        group: Type.Union([Type.String(), Type.Integer(), Type.Null()]),
        voters: Type.Integer(),
        voted: Type.Integer(),
        supporters: Type.Integer({ description: 'Voters of support level 1 or 2.' }),
        supporters_voted: Type.Integer(),
      }),
    ),
  },
  { title: 'Turnout' },
);

export const ToCallQuery = Type.Object(
  {
    ...PageQuery.properties,
    booth: Type.Optional(Type.String({ maxLength: 200 })),
    part_number: Type.Optional(Type.Integer({ minimum: 1, maximum: 9999 })),
  },
  { additionalProperties: false },
);

export const ToCallItem = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    name_local: Nullable(Type.String()),
    phone: Nullable(Type.String()),
    booth: Nullable(Type.String()),
    part_number: Nullable(Type.Integer()),
    serial_number: Nullable(Type.Integer()),
    house_number: Nullable(Type.String()),
    support_level: Type.Integer(),
  },
  { title: 'ToCallItem' },
);
