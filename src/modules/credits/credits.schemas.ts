import { Type } from 'typebox';
import { creditChannels } from '../../domain.ts';
import { PageQuery, Timestamp, Ref } from '../../http/schemas.ts';
import type { CreditAmounts } from './credits.repository.ts';

export const Credits = Type.Object(
  {
    sms_credits: Type.Integer(),
    whatsapp_credits: Type.Integer(),
    email_credits: Type.Integer(),
  },
  { title: 'Credits', description: "The workspace's credit balance per channel." },
);

export function creditsView(amounts: CreditAmounts) {
  return { sms_credits: amounts.sms, whatsapp_credits: amounts.whatsapp, email_credits: amounts.email };
}

export const ledgerReasons = ['signup', 'grant', 'payment', 'charge', 'refund'] as const;
export type LedgerReason = (typeof ledgerReasons)[number];

export const LedgerQuery = Type.Object({
  ...PageQuery.properties,
  channel: Type.Optional(
    Type.Enum([...creditChannels], { description: 'Only this channel: sms, whatsapp or email.' }),
  ),
});

export const LedgerEntry = Type.Object(
  {
    id: Type.Integer(),
    channel: Type.Enum([...creditChannels]),
    amount: Type.Integer({
      description: 'Signed change to the balance: credits added are positive, credits taken negative.',
    }),
    reason: Type.Enum([...ledgerReasons], {
      description:
        '`signup` (the credits a new workspace starts with), `grant` (added by an operator, e.g. the CLI), ' +
        '`payment` (bought; see payment_id), `charge` (taken for a message or a campaign when it was sent), ' +
        '`refund` (given back for messages that failed or were cancelled, or a campaign counted fewer recipients).',
    }),
    message_id: Type.Union([Ref('msg'), Type.Null()], {
      description: '`msg_<n>`: the single message charged or refunded.',
    }),
    campaign_id: Type.Union([Ref('camp'), Type.Null()], {
      description:
        '`camp_<n>`: the campaign or broadcast charged or refunded (one entry for all its messages).',
    }),
    payment_id: Type.Union([Type.Integer(), Type.Null()], {
      description: 'The payment that bought the credits.',
    }),
    created_at: Timestamp,
  },
  { title: 'LedgerEntry' },
);
