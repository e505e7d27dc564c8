import { Type } from 'typebox';
import type { UserRow } from '../../db/schema.ts';
import { PageQuery, Timestamp } from '../../http/schemas.ts';

export const RoleSchema = Type.Union(
  [Type.Literal('politician'), Type.Literal('manager'), Type.Literal('volunteer')],
  { title: 'Role' },
);

export const User = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    email: Type.String(),
    phone: Type.Union([Type.String(), Type.Null()], { description: 'E.164; used for OTP sign-in.' }),
    role: RoleSchema,
    workspace_id: Type.Integer(),
    active: Type.Boolean({
      description: 'false once deactivated: the user cannot sign in and none of their tokens works.',
    }),
    coverage: Type.Object(
      {
        wards: Type.Array(Type.String()),
        booths: Type.Array(Type.String()),
        constituencies: Type.Array(Type.String()),
      },
      { description: "Where new conversations go to this volunteer (by the contact's voter record)." },
    ),
    created_at: Timestamp,
  },
  { title: 'User' },
);

/** A team member as managers list them (to assign conversations): no email, phone or dates. */
export const TeamMember = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    role: RoleSchema,
    active: Type.Boolean(),
    coverage: User.properties.coverage,
  },
  { title: 'TeamMember' },
);

const Places = Type.Array(Type.String({ minLength: 1, maxLength: 200 }), {
  maxItems: 500,
  uniqueItems: true,
});
export const CoverageSchema = Type.Object(
  { wards: Type.Optional(Places), booths: Type.Optional(Places), constituencies: Type.Optional(Places) },
  {
    title: 'Coverage',
    additionalProperties: false,
    description:
      "A volunteer's coverage: a new conversation whose voter is in one of these wards, booths or constituencies goes to the covering active volunteer with the fewest open conversations. Replaces the whole coverage; {} clears it.",
  },
);

export const Name = Type.String({ minLength: 1, maxLength: 200 });
export const Email = Type.String({ format: 'email', maxLength: 254 });
export const Password = Type.String({
  minLength: 8,
  maxLength: 200,
  description:
    'At least 8 characters besides surrounding spaces; not one of the 10,000 most commonly used passwords, ' +
    "one character repeated, or the account's own email, phone or name.",
});
export const Phone = Type.String({
  minLength: 1,
  maxLength: 32,
  description: 'Phone with a leading + and country code; a national number is read in DEFAULT_COUNTRY.',
});

export const CreateUserBody = Type.Object(
  {
    name: Name,
    email: Email,
    password: Password,
    phone: Type.Optional(Phone),
    role: { ...RoleSchema, description: 'Any role, politician included (as PATCH allows).' },
  },
  { additionalProperties: false },
);

export const UpdateUserBody = Type.Object(
  {
    name: Type.Optional(Name),
    role: Type.Optional(RoleSchema),
    active: Type.Optional(
      Type.Boolean({
        description:
          'false deactivates the user, revokes every token of theirs at once and unassigns their open conversations; true lets them sign in again.',
      }),
    ),
    coverage: Type.Optional(CoverageSchema),
  },
  { additionalProperties: false },
);

export const ListUsersQuery = Type.Object({
  ...PageQuery.properties,
  active: Type.Optional(
    Type.Boolean({ description: 'true: only active members; false: only deactivated ones. Unset: both.' }),
  ),
});

export function userView(row: UserRow) {
  return {
    id: row.id,
    name: row.name,
    email: row.email,
    phone: row.phone,
    role: row.role,
    workspace_id: row.workspace_id,
    active: row.deactivated_at === null,
    coverage: coverageOf(row),
    created_at: row.created_at,
  };
}

/** Where a volunteer's new conversations come from (users.coverage, stored as JSON). */
export interface Coverage {
  wards?: string[] | undefined;
  booths?: string[] | undefined;
  constituencies?: string[] | undefined;
}

/** A user's coverage with every list present (empty when none). */
export function coverageOf(row: Pick<UserRow, 'coverage'>): Required<Coverage> {
  const c = row.coverage ? (JSON.parse(row.coverage) as Coverage) : {};
  return { wards: c.wards ?? [], booths: c.booths ?? [], constituencies: c.constituencies ?? [] };
}
