import { Type } from 'typebox';
import { Page, PageQuery, Timestamp } from '../../http/schemas.ts';
import { voterLimits } from './voters.rules.ts';

const Nullable = <T extends ReturnType<typeof Type.String>>(schema: T) => Type.Union([schema, Type.Null()]);
const StringOrNumber = (maxLength: number, description: string) =>
  Type.Union([Type.String({ maxLength }), Type.Number(), Type.Null()], { description });

const fields = {
  name: Type.String({ minLength: 1, maxLength: voterLimits.name, 'x-not-blank': true }),
  phone: Type.String({
    minLength: 1,
    maxLength: 32,
    description: 'Stored in E.164 (+919812345678); a number without + is read in DEFAULT_COUNTRY.',
    'x-phone': true,
  }),
  email: Nullable(Type.String({ maxLength: voterLimits.email, format: 'email' })),
  constituency: Nullable(Type.String({ maxLength: voterLimits.constituency })),
  booth: StringOrNumber(voterLimits.booth, 'Booth number, kept as a string.'),
  ward: StringOrNumber(voterLimits.ward, 'Ward number, kept as a string.'),
  address: Nullable(Type.String({ maxLength: voterLimits.address })),
};

export const CreateVoterBody = Type.Object(
  {
    name: fields.name,
    phone: fields.phone,
    email: Type.Optional(fields.email),
    constituency: Type.Optional(fields.constituency),
    booth: Type.Optional(fields.booth),
    ward: Type.Optional(fields.ward),
    address: Type.Optional(fields.address),
  },
  { additionalProperties: false },
);

export const UpdateVoterBody = Type.Object(
  {
    name: Type.Optional(fields.name),
    phone: Type.Optional(fields.phone),
    email: Type.Optional(fields.email),
    constituency: Type.Optional(fields.constituency),
    booth: Type.Optional(fields.booth),
    ward: Type.Optional(fields.ward),
    address: Type.Optional(fields.address),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description: 'Any subset of the voter fields; null clears an optional one.',
  },
);

const NullableString = Type.Union([Type.String(), Type.Null()]);

export const Voter = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    phone: Type.String(),
    email: NullableString,
    constituency: NullableString,
    booth: NullableString,
    ward: NullableString,
    address: NullableString,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'Voter' },
);

export const VoterListItem = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    phone: Type.String(),
    constituency: NullableString,
    booth: NullableString,
    ward: NullableString,
  },
  { title: 'VoterListItem' },
);

/** A page of voters: the page envelope and whether `total` is the true count. */
export const VoterPage = Type.Object(
  {
    ...Page(VoterListItem).properties,
    total_exact: Type.Boolean({
      description:
        'false when a `search` matches more than 10,000 voters: `total` is then 10,000 and `last_page` follows from it. Lists without `search` are always exact.',
    }),
  },
  { title: 'VoterPage' },
);

export const CreatedVoter = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    phone: Type.String(),
    created_at: Timestamp,
  },
  { title: 'CreatedVoter' },
);

export const UpdatedVoter = Type.Object(
  {
    id: Type.Integer(),
    name: Type.Optional(Type.String()),
    phone: Type.Optional(Type.String()),
    email: Type.Optional(NullableString),
    constituency: Type.Optional(NullableString),
    booth: Type.Optional(NullableString),
    ward: Type.Optional(NullableString),
    address: Type.Optional(NullableString),
    updated_at: Timestamp,
  },
  {
    title: 'UpdatedVoter',
    description: 'The id, the fields the request changed (as stored) and updated_at.',
  },
);

const filterFields = {
  search: Type.Optional(
    Type.String({
      maxLength: 100,
      description:
        'Case-insensitive substring of name or email; a term of digits, spaces and an optional leading + also matches phones containing those digits.',
    }),
  ),
  constituency: Type.Optional(
    Type.String({ maxLength: voterLimits.constituency, description: 'Exact, case-insensitive.' }),
  ),
  booth: Type.Optional(Type.String({ maxLength: voterLimits.booth, description: 'Exact.' })),
  ward: Type.Optional(Type.String({ maxLength: voterLimits.ward, description: 'Exact.' })),
};

export const ListVotersQuery = Type.Object({ ...PageQuery.properties, ...filterFields });

/** The filter object of export and segments: any of these four, nothing else. */
export const VoterFiltersSchema = Type.Object(filterFields, {
  additionalProperties: false,
  description: 'Any of constituency, booth, ward, search; anything else is a validation error.',
});
