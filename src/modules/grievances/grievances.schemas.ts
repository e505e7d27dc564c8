import { Type } from 'typebox';
import { PageQuery, RowId, Timestamp } from '../../http/schemas.ts';

/** Field limits of grievances. */
export const grievanceLimits = {
  title: 200,
  description: 5000,
  category: 100,
  reporterName: 200,
  constituency: 120,
  booth: 20,
  ward: 20,
  resolutionNote: 5000,
} as const;

const Status = Type.Union(
  [Type.Literal('open'), Type.Literal('in_progress'), Type.Literal('resolved'), Type.Literal('closed')],
  {
    description:
      'open -> in_progress -> resolved -> closed, and resolved -> open (reopen); closed is final. Any other move is 422.',
  },
);
const Priority = Type.Union(
  [Type.Literal('low'), Type.Literal('normal'), Type.Literal('high'), Type.Literal('urgent')],
  { description: 'Sets due_at: urgent 24 h, high 3 days, normal 7 days, low 14 days after created_at.' },
);
const text = (maxLength: number) => Type.Union([Type.String({ maxLength }), Type.Null()]);
const StringOrNumber = (maxLength: number, description: string) =>
  Type.Union([Type.String({ maxLength }), Type.Number(), Type.Null()], { description });

const fields = {
  title: Type.String({ minLength: 1, maxLength: grievanceLimits.title }),
  description: text(grievanceLimits.description),
  category: text(grievanceLimits.category),
  priority: Priority,
  voter_id: Type.Union([RowId, Type.Null()], { description: 'A voter of your workspace.' }),
  reporter_name: text(grievanceLimits.reporterName),
  reporter_phone: Type.Union([Type.String({ maxLength: 32 }), Type.Null()], {
    description: 'Stored in E.164; a number without + is read in DEFAULT_COUNTRY.',
  }),
  constituency: text(grievanceLimits.constituency),
  booth: StringOrNumber(grievanceLimits.booth, 'Booth number, kept as a string.'),
  ward: StringOrNumber(grievanceLimits.ward, 'Ward number, kept as a string.'),
  assigned_to: Type.Union([RowId, Type.Null()], { description: 'A user (team member) of your workspace.' }),
  resolution_note: text(grievanceLimits.resolutionNote),
};

export const CreateGrievanceBody = Type.Object(
  {
    title: fields.title,
    description: Type.Optional(fields.description),
    category: Type.Optional(fields.category),
    priority: Type.Optional(fields.priority),
    voter_id: Type.Optional(fields.voter_id),
    reporter_name: Type.Optional(fields.reporter_name),
    reporter_phone: Type.Optional(fields.reporter_phone),
    constituency: Type.Optional(fields.constituency),
    booth: Type.Optional(fields.booth),
    ward: Type.Optional(fields.ward),
    assigned_to: Type.Optional(fields.assigned_to),
  },
  { additionalProperties: false, description: 'A new grievance is `open`.' },
);

export const UpdateGrievanceBody = Type.Object(
  {
    title: Type.Optional(fields.title),
    description: Type.Optional(fields.description),
    category: Type.Optional(fields.category),
    status: Type.Optional(Status),
    priority: Type.Optional(fields.priority),
    voter_id: Type.Optional(fields.voter_id),
    reporter_name: Type.Optional(fields.reporter_name),
    reporter_phone: Type.Optional(fields.reporter_phone),
    constituency: Type.Optional(fields.constituency),
    booth: Type.Optional(fields.booth),
    ward: Type.Optional(fields.ward),
    assigned_to: Type.Optional(fields.assigned_to),
    resolution_note: Type.Optional(fields.resolution_note),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description:
      'Any subset of the fields; null clears an optional one. A priority change recomputes due_at from created_at.',
  },
);

const NullableString = Type.Union([Type.String(), Type.Null()]);

export const Grievance = Type.Object(
  {
    id: Type.Integer(),
    title: Type.String(),
    description: NullableString,
    category: NullableString,
    status: Status,
    priority: Priority,
    voter_id: Type.Union([Type.Integer(), Type.Null()]),
    reporter_name: NullableString,
    reporter_phone: NullableString,
    constituency: NullableString,
    booth: NullableString,
    ward: NullableString,
    assigned_to: Type.Union([Type.Integer(), Type.Null()]),
    resolution_note: NullableString,
    due_at: Timestamp,
    created_at: Timestamp,
    updated_at: Timestamp,
    resolved_at: Type.Union([Timestamp, Type.Null()]),
  },
  { title: 'Grievance' },
);

export const ListGrievancesQuery = Type.Object({
  ...PageQuery.properties,
  status: Type.Optional(Status),
  priority: Type.Optional(Priority),
  category: Type.Optional(
    Type.String({ maxLength: grievanceLimits.category, description: 'Exact, case-insensitive.' }),
  ),
  constituency: Type.Optional(
    Type.String({ maxLength: grievanceLimits.constituency, description: 'Exact, case-insensitive.' }),
  ),
  assigned_to: Type.Optional(RowId),
  overdue: Type.Optional(
    Type.Boolean({ description: 'true: due_at has passed and the grievance is open or in progress.' }),
  ),
  search: Type.Optional(
    Type.String({ maxLength: 100, description: 'Case-insensitive substring of title or description.' }),
  ),
});
