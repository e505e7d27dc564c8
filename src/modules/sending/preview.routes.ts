import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { validationError } from '../../errors.ts';
import { authOf } from '../../http/guard.ts';
import { Success, Timestamp, Ref } from '../../http/schemas.ts';
import { CampaignParams } from '../campaigns/campaigns.schemas.ts';
import { ChannelSchema } from '../messages/messages.schemas.ts';
import type { CampaignPreview } from './preview.ts';

const PreviewResult = Type.Object(
  {
    campaign_id: Ref('camp'),
    channel: ChannelSchema,
    evaluated_at: Timestamp,
    total_recipients: Type.Integer({
      description: 'Distinct addresses: explicit recipients and segment voters.',
    }),
    opted_out: Type.Integer({ description: 'Skipped: opted out of the channel (or of all).' }),
    silence_period: Type.Integer({
      description: 'Skipped: voters of a constituency in a silence period then.',
    }),
    skipped_no_address: Type.Integer({
      description:
        'Segment voters with no address for the channel (no phone: a voter from the roll; no email), not counted in total_recipients.',
    }),
    to_send: Type.Integer({ description: 'What would go out.' }),
    held: Type.Integer({ description: 'Of to_send, held by quiet hours until held_until.' }),
    held_until: Type.Union([Timestamp, Type.Null()]),
    estimated_credits: Type.Integer({
      description: 'Credits to_send would take (templates: trued up per recipient).',
    }),
    credits_to_reserve: Type.Integer({
      description:
        'What sending reserves at once: every recipient (skipped ones are refunded as they are skipped). Send is 402 when the workspace has fewer.',
    }),
    credits_available: Type.Union([Type.Integer(), Type.Null()], {
      description: "The workspace's credits of the channel now; null for a channel without credits.",
    }),
  },
  { title: 'CampaignPreview' },
);

const PreviewQuery = Type.Object({
  at: Type.Optional(
    Type.String({
      format: 'date-time',
      description:
        "Evaluate as if it went out at this time (a 'Send at' not yet saved); default: the campaign's scheduled_at, else now.",
    }),
  ),
});

export const previewRoutes: FastifyPluginAsyncTypebox<{ preview: CampaignPreview }> = async (
  app,
  { preview },
) => {
  app.post(
    '/campaigns/:id/preview',
    {
      config: { permission: 'campaigns:manage' },
      schema: {
        tags: ['Campaigns'],
        summary: 'Preview a draft or scheduled campaign: who would be skipped or held, and why',
        description:
          "Evaluated at the campaign's scheduled_at (or now): opt-outs, silence periods in force then, and quiet " +
          'hours. Nothing is sent or reserved. A campaign in any other status is 409.',
        params: CampaignParams,
        querystring: PreviewQuery,
        response: { 200: Success(PreviewResult) },
      },
    },
    async (request) => {
      const at = request.query.at !== undefined ? new Date(request.query.at) : undefined;
      if (at && Number.isNaN(at.getTime()))
        throw validationError({ at: ['must be an ISO 8601 date-time, e.g. 2026-12-08T05:30:00Z.'] });
      return {
        success: true as const,
        data: await preview.preview(authOf(request).workspaceId, request.params.id, new Date(), at),
      };
    },
  );
};
