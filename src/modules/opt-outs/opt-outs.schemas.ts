import { Type } from 'typebox';
import { optOutChannels, optOutSources } from '../../domain.ts';
import { PageQuery, RowId, Timestamp } from '../../http/schemas.ts';

export const OptOutChannelSchema = Type.Enum([...optOutChannels], {
  title: 'OptOutChannel',
  description: 'whatsapp, sms, email, ivr, or all (every channel).',
});

export const OptOutItem = Type.Object(
  {
    id: RowId,
    address: Type.String({ description: 'E.164 phone, or lower-cased email address.' }),
    channel: OptOutChannelSchema,
    source: Type.Enum([...optOutSources], {
      description: 'manual (added here or imported), keyword (a STOP reply), unsubscribe_link, provider.',
    }),
    reason: Type.Union([Type.String(), Type.Null()]),
    created_at: Timestamp,
  },
  { title: 'OptOut' },
);

export const CreateOptOutBody = Type.Object(
  {
    address: Type.String({
      minLength: 1,
      maxLength: 254,
      description: 'A phone (read in DEFAULT_COUNTRY without a country code) or an email address.',
    }),
    channel: OptOutChannelSchema,
    reason: Type.Optional(Type.String({ maxLength: 500 })),
  },
  { additionalProperties: false },
);

export const ListOptOutsQuery = Type.Object({
  ...PageQuery.properties,
  channel: Type.Optional(OptOutChannelSchema),
  address: Type.Optional(
    Type.String({ minLength: 1, maxLength: 254, description: 'A phone or email address (exact match).' }),
  ),
});

export const ImportOptOutsResult = Type.Object(
  {
    created: Type.Integer({ description: 'New opt-outs.' }),
    existing: Type.Integer({ description: 'Rows already opted out (left as they were).' }),
    failed: Type.Integer(),
    errors: Type.Array(
      Type.Object({
        row: Type.Integer({ description: 'CSV line.' }),
        field: Type.String(),
        message: Type.String(),
      }),
      { description: 'At most 1,000.' },
    ),
  },
  { title: 'OptOutImportResult' },
);
