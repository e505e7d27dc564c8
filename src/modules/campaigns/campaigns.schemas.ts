import { Type } from 'typebox';
import { campaignStatuses } from '../../db/schema.ts';
import { Timestamp } from '../../http/schemas.ts';
import {
  ChannelSchema,
  MediaUrl,
  MessageText,
  Recipients,
  SegmentId,
  Subject,
  TemplateId,
} from '../messages/messages.schemas.ts';

export const CampaignStatusSchema = Type.Enum([...campaignStatuses], {
  description:
    'draft -> (scheduled) -> queued (credits reserved) -> sending -> completed; cancelled stops what has not gone out.',
});

export const CreateCampaignBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    channel: ChannelSchema,
    message: Type.Optional(MessageText),
    recipients: Type.Optional(Recipients),
    segment_id: Type.Optional(SegmentId),
    scheduled_at: Type.Optional(
      Type.String({
        format: 'date-time',
        description: 'A future ISO 8601 date-time: the campaign is `scheduled` and starts then by itself.',
      }),
    ),
    template_id: Type.Optional(TemplateId),
    media_url: Type.Optional(MediaUrl),
    subject: Type.Optional(Subject),
  },
  { additionalProperties: false },
);

export const CampaignParams = Type.Object({
  id: Type.String({ description: '`camp_<n>` (or just `<n>`).', maxLength: 40 }),
});

export const Campaign = Type.Object({
  id: Type.String({ description: '`camp_<n>`' }),
  name: Type.String(),
  channel: ChannelSchema,
  message: Type.String(),
  status: CampaignStatusSchema,
  segment_id: Type.Union([Type.Integer(), Type.Null()]),
  total_recipients: Type.Integer({ description: 'Counted when the campaign is sent (0 before).' }),
  stats: Type.Object(
    {
      queued: Type.Integer(),
      sent: Type.Integer(),
      delivered: Type.Integer(),
      failed: Type.Integer(),
    },
    { description: 'Its messages by status, live.' },
  ),
  scheduled_at: Type.Union([Timestamp, Type.Null()]),
  created_at: Timestamp,
  started_at: Type.Union([Timestamp, Type.Null()]),
  completed_at: Type.Union([Timestamp, Type.Null()]),
});
