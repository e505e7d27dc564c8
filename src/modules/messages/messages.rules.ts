import type { CreditChannel, MessageChannel } from '../../domain.ts';
import { AppError, type FieldErrors } from '../../errors.ts';
import { smsSegments } from '../../lib/sms.ts';
import { toE164 } from '../../lib/phone.ts';

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** A recipient as the channel needs it (E.164 phone, or a lower-cased email address), or undefined. */
export function recipientAddress(
  channel: MessageChannel,
  raw: string,
  defaultCountry: string,
): string | undefined {
  if (channel === 'email') {
    const email = raw.trim().toLowerCase();
    return email.length <= 254 && EMAIL.test(email) ? email : undefined;
  }
  return toE164(raw, defaultCountry);
}

export function addressProblem(channel: MessageChannel): string {
  return channel === 'email'
    ? 'must be a valid email address.'
    : 'must be a valid phone number, e.g. +919812345678 (a number without + is read in DEFAULT_COUNTRY).';
}

/** Credits one message costs: SMS per segment, WhatsApp and email one, IVR none. */
export function unitCost(channel: MessageChannel, message: string): number {
  switch (channel) {
    case 'sms':
      return smsSegments(message);
    case 'whatsapp':
    case 'email':
      return 1;
    case 'ivr':
      return 0;
  }
}

/** The credit balance a channel draws on; IVR is not metered. */
export function creditChannel(channel: MessageChannel): CreditChannel | undefined {
  return channel === 'ivr' ? undefined : channel;
}

/** Checks of the content shared by send, broadcast and campaigns; adds to `errors`. */
export function contentProblems(
  input: { message: string; media_url?: string | undefined },
  errors: FieldErrors,
): void {
  if (input.message.trim() === '') errors.message = ['must not be empty.'];
  if (input.media_url !== undefined) {
    let ok = false;
    try {
      ok = new URL(input.media_url).protocol === 'https:';
    } catch {
      ok = false;
    }
    if (!ok) errors.media_url = ['must be an https URL.'];
  }
}

export function insufficientCredits(channel: CreditChannel, required: number, available: number): AppError {
  return new AppError(
    'insufficient_credits',
    `Not enough ${channel} credits: this needs ${required}, the workspace has ${available}.`,
    { channel, required, available },
  );
}
