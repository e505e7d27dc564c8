import { Type } from 'typebox';
import { Timestamp } from '../../http/schemas.ts';
import { StoredVoterFilters, VoterFiltersSchema } from '../voters/voters.schemas.ts';

export const CreateSegmentBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    filters: Type.Optional(VoterFiltersSchema),
  },
  { additionalProperties: false },
);

export const UpdateSegmentBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    filters: Type.Optional(VoterFiltersSchema),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description: 'Send `name`, `filters` or both; `filters` replaces the whole filter object.',
  },
);

const segmentFields = {
  id: Type.Integer(),
  name: Type.String(),
  filters: StoredVoterFilters,
  created_at: Timestamp,
  updated_at: Timestamp,
};

export const Segment = Type.Object(segmentFields, { title: 'Segment' });

export const SegmentWithCount = Type.Object(
  {
    ...segmentFields,
    voter_count: Type.Integer({ description: 'Voters matching the filters right now.' }),
  },
  { title: 'SegmentWithCount' },
);
