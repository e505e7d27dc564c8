import { Type } from 'typebox';
import { templateCategories } from '../../domain.ts';
import { PageQuery, Timestamp, RefInput, Ref } from '../../http/schemas.ts';
import { templateProviders } from '../../providers/registry.ts';
import { ChannelSchema } from '../messages/messages.schemas.ts';

const Nullable = (maxLength: number, description: string) =>
  Type.Union([Type.String({ maxLength }), Type.Null()], { description });

const CategorySchema = Type.Enum([...templateCategories], {
  description:
    'promotional (default), service or transactional; service and transactional are not held by quiet hours.',
});

export const TemplateItem = Type.Object(
  {
    id: Ref('tpl'),
    name: Type.String(),
    channel: ChannelSchema,
    body: Type.String(),
    language: Type.String(),
    category: CategorySchema,
    dlt_template_id: Type.Union([Type.String(), Type.Null()]),
    sender_id: Type.Union([Type.String(), Type.Null()]),
    subject: Type.Union([Type.String(), Type.Null()]),
    provider_template_ids: Type.Record(Type.String(), Type.String(), {
      description: `The template at each provider that keeps its own (${templateProviders
        .map((a) => a.name)
        .join(', ')}), by provider; {} when none.`,
    }),
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
      "May use {{name}}, {{first_name}}, {{name_local}}, {{first_name_local}} (the roll's own-script name, else the name), {{constituency}}, {{booth}}, {{ward}} (the workspace's name for the place, else the roll's spelling), each with an optional fallback ({{first_name|friend}}); any other variable is 422.",
  }),
  language: Type.String({ minLength: 1, maxLength: 20, description: 'e.g. en, hi (default en).' }),
  category: CategorySchema,
  dlt_template_id: Nullable(64, 'The template id registered on the DLT platform (TRAI).'),
  sender_id: Nullable(20, 'The DLT header (sender id) the template is registered with.'),
  subject: Nullable(200, 'Email subject.'),
  provider_template_ids: Type.Union(
    [
      Type.Object(
        Object.fromEntries(
          templateProviders.map((a) => [
            a.name,
            Type.Optional(
              Type.String({ maxLength: a.templates!.maxLength, description: `${a.templates!.idLabel}.` }),
            ),
          ]),
        ),
        { additionalProperties: false },
      ),
      Type.Null(),
    ],
    {
      description:
        'The template at providers that keep their own, by provider: ' +
        templateProviders
          .map(
            (a) =>
              `\`${a.name}\` (${a.label}${a.templates!.sends === 'only' ? ', which sends only through its own templates' : ''})`,
          )
          .join(', ') +
        '. null clears them.',
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
  id: RefInput('tpl'),
});

export const ListTemplatesQuery = Type.Object({
  ...PageQuery.properties,
  channel: Type.Optional(ChannelSchema),
});
