import type { OptOutRow } from '../../db/schema.ts';
import type { OptOutChannel } from '../../domain.ts';
import { hmacHex } from '../../lib/crypto.ts';
import { recipientAddress } from '../messages/messages.rules.ts';

/**
 * An address as opt-outs keep it (the form messages.to has): E.164 for phones, lower-cased for email. For
 * `all`, an address with an `@` is an email, anything else a phone.
 */
export function optOutAddress(
  channel: OptOutChannel,
  raw: string,
  defaultCountry: string,
): string | undefined {
  if (channel === 'all') return recipientAddress(raw.includes('@') ? 'email' : 'sms', raw, defaultCountry);
  return recipientAddress(channel, raw, defaultCountry);
}

export function optOutAddressProblem(channel: OptOutChannel): string {
  if (channel === 'email') return 'must be a valid email address.';
  if (channel === 'all')
    return 'must be a valid email address or phone number, e.g. +919812345678 (a number without + is read in DEFAULT_COUNTRY).';
  return 'must be a valid phone number, e.g. +919812345678 (a number without + is read in DEFAULT_COUNTRY).';
}

export function optOutItem(row: OptOutRow) {
  return {
    id: row.id,
    address: row.address,
    channel: row.channel,
    source: row.source,
    reason: row.reason,
    created_at: row.created_at,
  };
}

/**
 * What an erasure keeps of an address (E.164 or a lower-cased email): `#` and a keyed hash (HMAC-SHA-256 under
 * APP_KEY, 40 hex digits). The same address always gives the same mark, so the opt-out still matches it; the
 * mark gives the address back to nobody without the key.
 */
export function erasedMark(key: Buffer, address: string): string {
  return `#${hmacHex(key, `erased-address\n${address}`).slice(0, 40)}`;
}

/** Whether a stored address is an erased person's mark (never a phone or an email). */
export const isErasedMark = (address: string) => address.startsWith('#');
