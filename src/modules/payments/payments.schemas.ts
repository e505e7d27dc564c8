import { Type } from 'typebox';
import { Timestamp } from '../../http/schemas.ts';
import { Credits } from '../credits/credits.schemas.ts';

/** The most credits of one channel a single payment may buy. */
export const maxCreditsPerPayment = 1_000_000;

const amount = (channel: string) =>
  Type.Integer({
    minimum: 0,
    maximum: maxCreditsPerPayment,
    description: `${channel} credits to buy (0-${maxCreditsPerPayment}).`,
  });

export const CreatePaymentBody = Type.Object(
  {
    sms_credits: Type.Optional(amount('SMS')),
    whatsapp_credits: Type.Optional(amount('WhatsApp')),
    email_credits: Type.Optional(amount('Email')),
    gateway: Type.Optional(
      Type.Literal('sandbox', { description: 'The payment gateway; `sandbox` (default) completes at once.' }),
    ),
  },
  { additionalProperties: false, description: 'At least one amount must be positive.' },
);

export const Payment = Type.Object(
  {
    id: Type.Integer(),
    status: Type.Literal('completed'),
    gateway: Type.Literal('sandbox'),
    charged: Type.Literal(false, {
      description:
        'No payment provider is set (none is built): the credits are recorded, nothing is charged.',
    }),
    sms_credits: Type.Integer(),
    whatsapp_credits: Type.Integer(),
    email_credits: Type.Integer(),
    created_at: Timestamp,
    completed_at: Type.Union([Timestamp, Type.Null()]),
  },
  { title: 'Payment' },
);

export const ProcessedPayment = Type.Object(
  {
    payment: Payment,
    credits: Credits,
  },
  { title: 'ProcessedPayment' },
);
