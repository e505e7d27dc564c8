import { Type } from 'typebox';
import { PATTERNS, RefInput, Ref } from '../../http/schemas.ts';
import { PageQuery, Timestamp } from '../../http/schemas.ts';
import { fieldFilters, filterFields, VoterFiltersSchema } from '../voters/voters.schemas.ts';
import { CHOICES_MAX, QUESTIONS_MAX, RETRIES_MAX, TEXT_MAX, TRIGGERS_MAX } from './surveys.rules.ts';

const Texts = Type.Record(Type.String({ pattern: '^[a-z]{2}$' }), Type.String({ maxLength: TEXT_MAX }), {
  description:
    'Texts by language (`en`, `hi`, ...): a voter gets their `language` where given, else the first.',
});

const TemplateRef = Type.String({ maxLength: 30, pattern: '^tpl_[0-9]{1,15}$' });
const Templates = Type.Object(
  {
    sms: Type.Optional(TemplateRef),
    whatsapp: Type.Optional(TemplateRef),
  },
  {
    additionalProperties: false,
    title: 'SurveyTemplates',
    description:
      'The templates this text goes as, by channel: `sms` a DLT-registered template (every SMS of a ' +
      'templates-only channel is one), `whatsapp` an approved WhatsApp template (the first message of a ' +
      "session). Their variables render from the voter as a campaign's do.",
  },
);

/** An intro or outro: texts by language, and optionally the templates it goes as. */
const Framing = Type.Object(
  { templates: Type.Optional(Templates) },
  {
    patternProperties: { '^[a-z]{2}$': Type.String({ maxLength: TEXT_MAX }) },
    additionalProperties: false,
    description:
      'Texts by language (`en`, `hi`, ...), and `templates` ({ sms, whatsapp }) it goes as. The intro goes ' +
      "with the first question, as that question's template where it has one.",
  },
);

const Choice = Type.Object(
  {
    key: Type.String({ maxLength: 20, description: 'What a voter types or presses: 1, 2, ...' }),
    label: Texts,
    keywords: Type.Optional(Type.Array(Type.String({ maxLength: 100 }), { maxItems: 20 })),
  },
  { additionalProperties: false, title: 'SurveyChoice' },
);

export const SurveyQuestion = Type.Object(
  {
    key: Type.String({ maxLength: 40, description: 'a-z, 0-9, _; unique in the survey.' }),
    text: Texts,
    type: Type.Union([Type.Literal('choice'), Type.Literal('number'), Type.Literal('text')]),
    choices: Type.Optional(Type.Array(Choice, { maxItems: CHOICES_MAX })),
    min: Type.Optional(Type.Number()),
    max: Type.Optional(Type.Number()),
    save_to: Type.Optional(
      Type.String({
        maxLength: 60,
        description: '`support_level`, `tags` (the choice key) or `field:<key>`.',
      }),
    ),
    templates: Type.Optional(Templates),
    template_id: Type.Optional(
      Type.String({
        maxLength: 30,
        pattern: '^tpl_[0-9]{1,15}$',
        description: 'The same as `templates.sms` (kept for earlier clients).',
      }),
    ),
    audio_url: Type.Optional(
      Type.String({
        maxLength: 2000,
        format: 'uri',
        description: 'IVR: a recording the call plays instead of speaking the text.',
      }),
    ),
  },
  { additionalProperties: false, title: 'SurveyQuestion' },
);

const Trigger = Type.Union(
  [
    Type.Object(
      {
        channel: Type.Union([Type.Literal('sms'), Type.Literal('whatsapp')]),
        keyword: Type.String({ maxLength: 40 }),
      },
      { additionalProperties: false },
    ),
    Type.Object(
      {
        missed_call: Type.Literal(true),
        channel_account_id: RefInput(
          'cha',
          'The account whose number is called (its provider takes missed calls: docs/providers.md).',
        ),
        reply_channel: Type.Union([Type.Literal('sms'), Type.Literal('whatsapp'), Type.Literal('ivr')]),
      },
      { additionalProperties: false },
    ),
  ],
  { title: 'SurveyTrigger' },
);

const definition = {
  intro: Type.Optional(Framing),
  outro: Type.Optional(Framing),
  questions: Type.Array(SurveyQuestion, { minItems: 1, maxItems: QUESTIONS_MAX }),
  retries: Type.Optional(Type.Integer({ minimum: 0, maximum: RETRIES_MAX, default: 2 })),
  triggers: Type.Optional(Type.Array(Trigger, { maxItems: TRIGGERS_MAX })),
};

const Status = Type.Union([Type.Literal('draft'), Type.Literal('active'), Type.Literal('closed')]);

export const CreateSurveyBody = Type.Object(
  { name: Type.String({ minLength: 1, maxLength: 200 }), status: Type.Optional(Status), ...definition },
  { additionalProperties: false },
);

export const UpdateSurveyBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    status: Type.Optional(Status),
    intro: definition.intro,
    outro: definition.outro,
    questions: Type.Optional(definition.questions),
    retries: definition.retries,
    triggers: definition.triggers,
  },
  { additionalProperties: false, minProperties: 1 },
);

export const Survey = Type.Object(
  {
    id: Ref('svy'),
    name: Type.String(),
    status: Status,
    intro: Framing,
    outro: Framing,
    questions: Type.Array(SurveyQuestion),
    retries: Type.Integer(),
    triggers: Type.Array(Trigger),
    has_run: Type.Boolean({ description: 'A survey that has run keeps its questions.' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'Survey' },
);

export const SurveyParams = Type.Object({ id: RefInput('svy') });
export const RunParams = Type.Object({ id: RefInput('srun') });

export const CreateRunBody = Type.Object(
  {
    channel: Type.Union([Type.Literal('sms'), Type.Literal('whatsapp'), Type.Literal('ivr')]),
    segment_id: Type.Optional(Type.Union([Type.String({ maxLength: 40 }), Type.Integer({ minimum: 1 })])),
    recipients: Type.Optional(Type.Array(Type.String({ maxLength: 320 }), { maxItems: 10_000 })),
    filters: Type.Optional(VoterFiltersSchema),
    channel_account_id: Type.Optional(RefInput('cha')),
    scheduled_at: Type.Optional(
      Type.String({
        format: 'date-time',
        maxLength: 40,
        description: 'ISO 8601 date-time with its zone, in the future.',
      }),
    ),
  },
  { additionalProperties: false },
);

export const SurveyRun = Type.Object(
  {
    id: Ref('srun'),
    survey_id: Ref('svy'),
    channel: Type.Union([Type.Literal('sms'), Type.Literal('whatsapp'), Type.Literal('ivr')]),
    channel_account_id: Type.Union([Ref('cha'), Type.Null()]),
    status: Type.Union(
      [
        Type.Literal('scheduled'),
        Type.Literal('running'),
        Type.Literal('completed'),
        Type.Literal('cancelled'),
        Type.Literal('failed'),
      ],
      {
        description:
          '`failed`: it ended with every session it opened refused by the provider (`last_error` says why).',
      },
    ),
    recipients: Type.Integer({
      description: 'Contacts the run reaches (counted at the start, trued up once its sessions are open).',
    }),
    started: Type.Integer({
      description: 'Sessions opened (the first question queued, or the call placed).',
    }),
    open: Type.Integer(),
    completed: Type.Integer(),
    partial: Type.Integer(),
    no_answer: Type.Integer(),
    opted_out: Type.Integer({ description: 'Skipped as opted out, or ended by STOP.' }),
    failed: Type.Integer({
      description: 'Sessions the provider refused a question (or the call) of: they ended `failed`.',
    }),
    last_error: Type.Union(
      [
        Type.Object(
          { error_code: Type.String(), error_message: Type.String(), at: Timestamp },
          { title: 'SurveyRunLastError' },
        ),
        Type.Null(),
      ],
      { description: "Its questions' latest refusal by the provider; null: none." },
    ),
    scheduled_at: Type.Union([Timestamp, Type.Null()]),
    created_at: Timestamp,
    started_at: Type.Union([Timestamp, Type.Null()]),
    completed_at: Type.Union([Timestamp, Type.Null()]),
  },
  { title: 'SurveyRun' },
);

export const CancelledSurveyRun = Type.Object(
  {
    ...SurveyRun.properties,
    in_flight: Type.Integer({
      description:
        "Questions in a provider's call when the cancel committed: they still go. Every other queued question " +
        'ended `failed` with `cancelled` and was refunded.',
    }),
  },
  { title: 'CancelledSurveyRun' },
);

const ResponseStatus = Type.Union(
  [
    Type.Literal('open'),
    Type.Literal('completed'),
    Type.Literal('partial'),
    Type.Literal('no_answer'),
    Type.Literal('failed'),
  ],
  {
    description:
      '`failed`: the provider refused one of its questions (or the call), and the session ended there; the ' +
      "run's `last_error` says why.",
  },
);

export const SurveyResponse = Type.Object(
  {
    id: Ref('sres'),
    survey_id: Ref('svy'),
    run_id: Type.Union([Ref('srun'), Type.Null()]),
    voter_id: Type.Union([Type.Integer(), Type.Null()]),
    address: Type.String({ description: "The voter's phone; empty for a visit to a voter without one." }),
    channel: Type.Union(
      [Type.Literal('sms'), Type.Literal('whatsapp'), Type.Literal('ivr'), Type.Literal('visit')],
      {
        description: '`visit`: answers taken at the door, with a visit (POST /api/visits).',
      },
    ),
    language: Type.String(),
    status: ResponseStatus,
    opted_out: Type.Boolean(),
    answers: Type.Object(
      {},
      {
        additionalProperties: Type.Union([Type.String(), Type.Number(), Type.Null()]),
        description: 'By question key: the choice key (or `other`), the number, or the text.',
      },
    ),
    started_at: Timestamp,
    completed_at: Type.Union([Timestamp, Type.Null()]),
  },
  { title: 'SurveyResponseRecord' },
);

const Counted = {
  answered: Type.Integer(),
  choices: Type.Optional(Type.Array(Type.Object({ key: Type.String(), count: Type.Integer() }))),
  mean: Type.Optional(Type.Union([Type.Number(), Type.Null()])),
};

export const SurveyResults = Type.Object(
  {
    responses: Type.Integer(),
    completed: Type.Integer(),
    group_by: Type.Optional(Type.String()),
    questions: Type.Array(
      Type.Object({
        key: Type.String(),
        type: Type.String(),
        ...Counted,
        groups: Type.Optional(
          Type.Array(Type.Object({ group: Type.Union([Type.String(), Type.Null()]), ...Counted })),
        ),
      }),
    ),
  },
  { title: 'SurveyResults' },
);

export const ResultsQuery = Type.Object(
  {
    group_by: Type.Optional(
      Type.Union([
        Type.Literal('booth'),
        Type.Literal('ward'),
        Type.Literal('constituency'),
        Type.Literal('part_number'),
      ]),
    ),
    ...filterFields,
  },
  {
    patternProperties: fieldFilters,
    [PATTERNS]: fieldFilters,
    description: "The voter list's filters narrow the results to the voters they match.",
  },
);

export const ResponsesQuery = Type.Object({
  ...PageQuery.properties,
  run_id: Type.Optional(RefInput('srun')),
  status: Type.Optional(ResponseStatus),
});

export const ResponsesExportQuery = Type.Object({
  format: Type.Union([Type.Literal('csv'), Type.Literal('excel')], { default: 'csv' }),
  run_id: Type.Optional(RefInput('srun')),
  include_sensitive: Type.Boolean({
    default: false,
    description:
      '`true` (politicians only; 403 otherwise) adds the columns of the questions that save to support_level or a sensitive custom field, left out otherwise; audited as `survey.exported_sensitive`, as a voter export with sensitive data is.',
  }),
});
