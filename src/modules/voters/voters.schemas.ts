import { Type } from 'typebox';
import { PATTERNS } from '../../http/schemas.ts';
import { Nullable, Page, PageQuery, Timestamp } from '../../http/schemas.ts';
import { voterLimits } from './voters.rules.ts';
import { genders } from './voter-record.rules.ts';

/** A voter's gender as the record keeps it (input also reads M, F, T and the Hindi words). */
const Gender = Type.Union([Type.Literal(genders[0]), Type.Literal(genders[1]), Type.Literal(genders[2])]);

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

const IntOrText = (description: string) =>
  Type.Union([Type.Integer(), Type.String({ maxLength: 20 }), Type.Null()], { description });
const TextOrNull = (maxLength: number, description: string) =>
  Type.Union([Type.String({ maxLength: maxLength * 4 }), Type.Null()], { description });

/** The voter record's fields (the contract's fourth part); checked in voter-record.rules.ts. */
const recordBody = {
  epic_number: Type.Optional(
    TextOrNull(
      10,
      "The Election Commission's photo identity card number: 3 letters and 7 digits; upper-cased; unique in the workspace.",
    ),
  ),
  part_number: Type.Optional(IntOrText('The roll part (1-9999), one per polling station.')),
  serial_number: Type.Optional(
    IntOrText('The serial in the part (1-9999); (part_number, serial_number) is unique in the workspace.'),
  ),
  page_number: Type.Optional(IntOrText("The page of the part's roll that holds the voter (1-999).")),
  house_number: Type.Optional(TextOrNull(40, 'At most 40 characters.')),
  relation_name: Type.Optional(TextOrNull(200, "The father's, mother's or husband's name in the roll.")),
  relation_type: Type.Optional(TextOrNull(20, 'father, mother, husband, wife or other.')),
  gender: Type.Optional(
    TextOrNull(20, 'male, female or third_gender (M, F, T and the Hindi words are read too).'),
  ),
  name_local: Type.Optional(TextOrNull(200, "The name in the roll's regional script.")),
  language: Type.Optional(TextOrNull(2, 'ISO 639-1, e.g. hi.')),
  birth_date: Type.Optional(TextOrNull(10, 'YYYY-MM-DD; or give age.')),
  age: Type.Optional(IntOrText('18-120; stored as an estimated birth year.')),
  support_level: Type.Optional(
    IntOrText(
      '1 (strong supporter) to 5 (strong opponent); null when unknown. Sensitive: politicians and managers only.',
    ),
  ),
  tags: Type.Optional(
    Type.Union([Type.Array(Type.String({ maxLength: 200 }), { maxItems: 200 }), Type.Null()], {
      description:
        "Up to 50 tags of 1-40 characters, in the place-name normal form; matched case-insensitively, shown as first written in the workspace. Replaces the voter's tags.",
    }),
  ),
  fields: Type.Optional(
    Type.Record(Type.String(), Type.Unknown(), {
      description:
        "Values of the workspace's custom fields, { key: value } (GET /api/voter-fields); null clears one, keys not named are kept.",
    }),
  ),
};

/** Consent recorded through the API (source `api`), with the privacy notice's version in force. */
const ConsentInput = Type.Optional(
  Type.Union([Type.Literal('given'), Type.Literal('withdrawn')], {
    description:
      "Records the voter's consent as given or withdrawn now (source `api`, the privacy notice's current version).",
  }),
);

export const Consent = Type.Object(
  {
    status: Type.Union([Type.Literal('given'), Type.Literal('withdrawn'), Type.Literal('unknown')]),
    notice_version: Type.Union([Type.Integer(), Type.Null()], {
      description: 'The privacy notice version in force when it was recorded (null: no notice written yet).',
    }),
    source: Type.Union(
      [
        Type.Literal('import'),
        Type.Literal('form'),
        Type.Literal('keyword'),
        Type.Literal('visit'),
        Type.Literal('api'),
        Type.Null(),
      ],
      {
        description:
          'How it was recorded: an import column, a form (the unsubscribe link or the public privacy page), STOP/START, a door visit, the API.',
      },
    ),
    at: Type.Union([Timestamp, Type.Null()]),
  },
  {
    title: 'Consent',
    description:
      'The DPDP consent of the voter. STOP on any channel, the unsubscribe link and the public privacy form record `withdrawn`; with PRIVACY_REQUIRE_CONSENT only `given` voters get bulk messages.',
  },
);

export const CreateVoterBody = Type.Object(
  {
    name: fields.name,
    phone: fields.phone,
    email: Type.Optional(fields.email),
    constituency: Type.Optional(fields.constituency),
    booth: Type.Optional(fields.booth),
    ward: Type.Optional(fields.ward),
    address: Type.Optional(fields.address),
    ...recordBody,
    consent: ConsentInput,
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
    ...recordBody,
    consent: ConsentInput,
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description: 'Any subset of the voter fields; null clears an optional one.',
  },
);

const NullableString = Type.Union([Type.String(), Type.Null()]);
const NullableInt = Type.Union([Type.Integer(), Type.Null()]);
const FieldValue = Type.Union([Type.String(), Type.Number(), Type.Boolean(), Type.Null()]);

/** The record's fields as a voter read shows them. */
const recordView = {
  epic_number: NullableString,
  part_number: NullableInt,
  serial_number: NullableInt,
  page_number: NullableInt,
  house_number: NullableString,
  relation_name: NullableString,
  relation_type: NullableString,
  gender: Type.Union([Gender, Type.Null()]),
  name_local: NullableString,
  language: Type.Union([Type.String({ pattern: '^[a-z]{2}$', description: 'ISO 639-1.' }), Type.Null()]),
  birth_date: Type.Union([Type.String({ format: 'date' }), Type.Null()], {
    description: 'Only when known; an age given on input keeps only the estimated year.',
  }),
  age: Type.Union([Type.Integer(), Type.Null()], { description: 'Computed today.' }),
  support_level: Type.Optional(
    Type.Union([Type.Integer({ minimum: 1, maximum: 5 }), Type.Null()], {
      description: 'Left out for volunteers (sensitive).',
    }),
  ),
  tags: Type.Array(Type.String()),
  fields: Type.Record(Type.String(), FieldValue, {
    description: "Custom field values; a volunteer's read leaves out the sensitive fields.",
  }),
};

export const HouseholdMember = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    relation_type: Type.Union([Type.String(), Type.Null()], {
      description:
        "The member's own relation to `relation_name` (as the roll gives it), not to the voter read.",
    }),
    relation_name: NullableString,
    age: NullableInt,
  },
  { title: 'HouseholdMember' },
);

export const Voter = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    phone: Type.Union([Type.String(), Type.Null()], {
      description: 'null for a voter imported from the roll without one: sends and campaigns skip them.',
    }),
    email: NullableString,
    constituency: NullableString,
    booth: NullableString,
    ward: NullableString,
    address: NullableString,
    ...recordView,
    household: Type.Array(HouseholdMember, {
      description:
        'The other voters of the household: the same part_number and house_number, or lacking those the same normalised address (at most 50).',
    }),
    consent: Consent,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'Voter' },
);

export const VoterListItem = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    phone: NullableString,
    constituency: NullableString,
    booth: NullableString,
    ward: NullableString,
    epic_number: NullableString,
    part_number: NullableInt,
    serial_number: NullableInt,
    tags: Type.Array(Type.String()),
    support_level: Type.Optional(
      Type.Union([Type.Integer(), Type.Null()], { description: 'Left out for volunteers (sensitive).' }),
    ),
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
    ...Object.fromEntries(Object.entries(recordView).map(([k, v]) => [k, Type.Optional(v)])),
    consent: Type.Optional(Consent),
    updated_at: Timestamp,
  },
  {
    title: 'UpdatedVoter',
    description: 'The id, the fields the request changed (as stored) and updated_at.',
  },
);

/** An integer filter in its range, as a number or as text (a query string's). */
const Num = (description: string, minimum = 1, maximum = Number.MAX_SAFE_INTEGER) =>
  Type.Optional(
    Type.Union(
      [Type.Integer({ minimum, maximum }), Type.String({ maxLength: 20, pattern: '^\\s*\\d+\\s*$' })],
      {
        description,
      },
    ),
  );
const List = (description: string) =>
  Type.Optional(
    Type.Union(
      [
        Type.String({ maxLength: 2200 }),
        Type.Array(Type.Union([Type.String({ maxLength: 200 }), Type.Integer()]), { maxItems: 50 }),
      ],
      { description },
    ),
  );

export const filterFields = {
  search: Type.Optional(
    Type.String({
      maxLength: 100,
      description:
        'Case-insensitive substring of name, name_local or email; also an exact epic_number; a term of digits, spaces and an optional leading + also matches phones containing those digits.',
    }),
  ),
  constituency: Type.Optional(
    Type.String({ maxLength: voterLimits.constituency, description: 'Exact, case-insensitive.' }),
  ),
  booth: Type.Optional(Type.String({ maxLength: voterLimits.booth, description: 'Exact.' })),
  ward: Type.Optional(Type.String({ maxLength: voterLimits.ward, description: 'Exact.' })),
  epic_number: Type.Optional(Type.String({ maxLength: 40, description: 'Exact (case-insensitive).' })),
  part_number: Num('1-9999.', 1, 9999),
  serial_from: Num('Serial numbers from this one (with part_number, a stretch of the roll).', 1, 9999),
  serial_to: Num('Serial numbers up to this one.', 1, 9999),
  page_number: Num('1-999.', 1, 999),
  page_from: Num("Roll pages from this one (a page-in-charge's pages, with part_number).", 1, 999),
  page_to: Num('Roll pages up to this one.', 1, 999),
  house_number: Type.Optional(Type.String({ maxLength: 160, description: 'Exact, case-insensitive.' })),
  gender: Type.Optional(
    Type.Union(
      genders.map((g) => Type.Literal(g)),
      { description: 'male, female or third_gender.' },
    ),
  ),
  age_min: Num('Age today at least this (0-150).', 0, 150),
  age_max: Num('Age today at most this (0-150).', 0, 150),
  language: Type.Optional(
    Type.String({ maxLength: 20, pattern: '^\\s*[A-Za-z]{2}\\s*$', description: 'ISO 639-1, e.g. hi.' }),
  ),
  support_level: List('One level or a comma list, e.g. 1,2. Politicians and managers only (sensitive).'),
  tags: List('Voters with all of these tags (comma list).'),
  tags_any: List('Voters with any of these tags.'),
  tags_none: List('Voters with none of these tags.'),
  household_of: Num("A voter id: that voter's household, the voter included."),
};

/** `fields.<key>` (equals), `fields.<key>_min` / `_max` (numbers and dates): custom field filters. */
export const fieldFilters = {
  '^fields\\.[a-z0-9_]{1,44}$': Type.Union([Type.String({ maxLength: 500 }), Type.Number(), Type.Boolean()]),
};

export const ListVotersQuery = Type.Object(
  { ...PageQuery.properties, ...filterFields },
  {
    patternProperties: fieldFilters,
    [PATTERNS]: fieldFilters,
    description:
      'Custom fields filter as fields.<key>=value (equals) and fields.<key>_min / fields.<key>_max (numbers and dates). Filters on support_level or a sensitive field are for politicians and managers.',
  },
);

/** The filter object of export and segments: the list's filters, nothing else. */
export const VoterFiltersSchema = Type.Object(filterFields, {
  title: 'VoterFilters',
  additionalProperties: false,
  patternProperties: fieldFilters,
  [PATTERNS]: fieldFilters,
  description:
    "The list's filters: constituency, booth, ward, search, the voter record's (epic_number, part_number, serial_from/serial_to, page_number, page_from/page_to, house_number, gender, age_min/age_max, language, support_level, tags, tags_any, tags_none, household_of) and fields.<key> (with _min/_max); anything else is a validation error.",
});

const Opt = <T extends Parameters<typeof Type.Optional>[0]>(schema: T) => Type.Optional(schema);

const storedFieldFilters = { '^fields\\.': Type.Union([Type.String(), Type.Number(), Type.Boolean()]) };

/** Filters as they are stored and shown (a segment's, a tagging job's): one form whatever was given. */
export const StoredVoterFilters = Type.Object(
  {
    search: Opt(Type.String()),
    constituency: Opt(Type.String()),
    booth: Opt(Type.String()),
    ward: Opt(Type.String()),
    epic_number: Opt(Type.String()),
    part_number: Opt(Type.Integer()),
    serial_from: Opt(Type.Integer()),
    serial_to: Opt(Type.Integer()),
    page_number: Opt(Type.Integer()),
    page_from: Opt(Type.Integer()),
    page_to: Opt(Type.Integer()),
    house_number: Opt(Type.String()),
    gender: Opt(Gender),
    age_min: Opt(Type.Integer()),
    age_max: Opt(Type.Integer()),
    language: Opt(Type.String({ pattern: '^[a-z]{2}$' })),
    support_level: Opt(Type.Array(Type.Integer())),
    tags: Opt(Type.Array(Type.String())),
    tags_any: Opt(Type.Array(Type.String())),
    tags_none: Opt(Type.Array(Type.String())),
    household_of: Opt(Type.Integer()),
  },
  {
    patternProperties: storedFieldFilters,
    [PATTERNS]: storedFieldFilters,
    description:
      'The voter filters in one form: numbers as numbers, lists as arrays, custom field values of their type.',
  },
);
