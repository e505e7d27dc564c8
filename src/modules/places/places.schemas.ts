import { Type } from 'typebox';
import { PageQuery, RowId, Timestamp } from '../../http/schemas.ts';

/** The most aliases a place keeps (the contract's fourth part). */
export const MAX_ALIASES = 50;
/** A place name's length: the voter field's (booth and ward 20, constituency 120), the longest of them here. */
export const placeNameLimits = { constituency: 120, ward: 20, booth: 20 } as const;

const Kind = Type.Union([Type.Literal('constituency'), Type.Literal('ward'), Type.Literal('booth')], {
  description: 'constituency, ward or booth.',
});
const Name = Type.String({ minLength: 1, maxLength: 120 });
const Aliases = Type.Array(Type.String({ minLength: 1, maxLength: 120 }), {
  maxItems: MAX_ALIASES,
  description:
    'Other names of the place (another script, a number, a common spelling): a voter, filter, segment, silence period or coverage that names any of them names this place.',
});
const Code = Type.Union([Type.String({ minLength: 1, maxLength: 40 }), Type.Null()], {
  description: "An official code, e.g. the Election Commission's assembly constituency number.",
});

export const PlaceItem = Type.Object(
  {
    id: RowId,
    kind: Kind,
    name: Type.String(),
    aliases: Type.Array(Type.String()),
    code: Type.Union([Type.String(), Type.Null()]),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'Place' },
);

export const CreatePlaceBody = Type.Object(
  { kind: Kind, name: Name, aliases: Type.Optional(Aliases), code: Type.Optional(Code) },
  { additionalProperties: false },
);

export const UpdatePlaceBody = Type.Object(
  { name: Type.Optional(Name), aliases: Type.Optional(Aliases), code: Type.Optional(Code) },
  { additionalProperties: false, minProperties: 1 },
);

export const ListPlacesQuery = Type.Object({
  ...PageQuery.properties,
  kind: Type.Optional(Kind),
});

/** An import's values that match no place, per kind (only kinds the workspace keeps places of). */
export const UnknownPlaces = Type.Object(
  {
    constituency: Type.Optional(Type.Array(Type.String())),
    ward: Type.Optional(Type.Array(Type.String())),
    booth: Type.Optional(Type.Array(Type.String())),
  },
  {
    description:
      'The values of the file that match no place, for each kind the workspace keeps places of (at most 100 each): add each as a place or as an alias of one.',
  },
);
