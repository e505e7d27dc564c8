import { Type } from 'typebox';
import { templateCategories } from '../../domain.ts';
import { PageQuery, Timestamp } from '../../http/schemas.ts';
import { ChannelSchema } from '../messages/messages.schemas.ts';

const Nullable = (maxLength: number, description: string) =>
  Type.Union([Type.String({ maxLength }), Type.Null()], { description });

const CategorySchema = Type.Enum([...templateCategories], {
  description:
    'promotional (default), service or transactional; service and transactional are not held by quiet hours.',
});

export const TemplateItem = Type.Object(
  {
    id: Type.String({ description: '`tpl_<n>`' }),
    name: Type.String(),
    channel: ChannelSchema,
    body: Type.String(),
    language: Type.String(),
    category: CategorySchema,
    dlt_template_id: Type.Union([Type.String(), Type.Null()]),
    sender_id: Type.Union([Type.String(), Type.Null()]),
    subject: Type.Union([Type.String(), Type.Null()]),
    provider_template_ids: Type.Object(
      { msg91: Type.Optional(Type.String()), whatsapp_cloud: Type.Optional(Type.String()) },
      { description: 'The template at each provider that keeps its own ({} when none).' },
    ),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'Template' },
);

const fields = {
  name: Type.String({ minLength: 1, maxLength: 200 }),
  channel: ChannelSchema,
  body: Type.String({
    minLength: 1,
    maxLength: 5000,
    description:
      'May use {{name}}, {{first_name}}, {{constituency}}, {{booth}}, {{ward}}; any other variable is 422.',
  }),
  language: Type.String({ minLength: 1, maxLength: 20, description: 'e.g. en, hi (default en).' }),
  category: CategorySchema,
  dlt_template_id: Nullable(64, 'The template id registered on the DLT platform (TRAI).'),
  sender_id: Nullable(20, 'The DLT header (sender id) the template is registered with.'),
  subject: Nullable(200, 'Email subject.'),
  provider_template_ids: Type.Union(
    [
      Type.Object(
        {
          msg91: Type.Optional(
            Type.String({ maxLength: 64, description: "The template's id in the MSG91 panel (Flow)." }),
          ),
          whatsapp_cloud: Type.Optional(
            Type.String({
              maxLength: 512,
              description: "The approved WhatsApp template's name, used with the template's language.",
            }),
          ),
        },
        { additionalProperties: false },
      ),
      Type.Null(),
    ],
    {
      description:
        'The template at providers that keep their own: MSG91 sends SMS only through a template with `msg91`; ' +
        'WhatsApp Cloud API accounts send the approved template named by `whatsapp_cloud`. null clears both.',
    },
  ),
};

export const CreateTemplateBody = Type.Object(
  {
    name: fields.name,
    channel: fields.channel,
    body: fields.body,
    language: Type.Optional(fields.language),
    category: Type.Optional(fields.category),
    dlt_template_id: Type.Optional(fields.dlt_template_id),
    sender_id: Type.Optional(fields.sender_id),
    subject: Type.Optional(fields.subject),
    provider_template_ids: Type.Optional(fields.provider_template_ids),
  },
  { additionalProperties: false },
);

export const UpdateTemplateBody = Type.Object(
  {
    name: Type.Optional(fields.name),
    channel: Type.Optional(fields.channel),
    body: Type.Optional(fields.body),
    language: Type.Optional(fields.language),
    category: Type.Optional(fields.category),
    dlt_template_id: Type.Optional(fields.dlt_template_id),
    sender_id: Type.Optional(fields.sender_id),
    subject: Type.Optional(fields.subject),
    provider_template_ids: Type.Optional(fields.provider_template_ids),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const TemplateParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 40, description: '`tpl_<n>`' }),
});

export const ListTemplatesQuery = Type.Object({
  ...PageQuery.properties,
  channel: Type.Optional(ChannelSchema),
});
