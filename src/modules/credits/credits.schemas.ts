import { Type } from 'typebox';
import type { CreditAmounts } from './credits.repository.ts';

export const Credits = Type.Object(
  {
    sms_credits: Type.Integer(),
    whatsapp_credits: Type.Integer(),
    email_credits: Type.Integer(),
  },
  { description: "The workspace's credit balance per channel." },
);

export function creditsView(amounts: CreditAmounts) {
  return { sms_credits: amounts.sms, whatsapp_credits: amounts.whatsapp, email_credits: amounts.email };
}
