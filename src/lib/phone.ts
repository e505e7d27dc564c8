import { type CountryCode, parsePhoneNumberFromString } from 'libphonenumber-js/min';

/**
 * A phone number in E.164 (`+919812345678`), or undefined when the input is not a valid number for its
 * country (not merely one of a possible length: `98390100265`, eleven digits, is refused; the contract's fourth
 * part). Numbers without a country code are read in `defaultCountry`.
 */
export function toE164(input: string, defaultCountry: string): string | undefined {
  const trimmed = input.trim();
  if (trimmed.length === 0 || trimmed.length > 32) return undefined;
  const parsed = parsePhoneNumberFromString(trimmed, defaultCountry as CountryCode);
  if (!parsed || !parsed.isValid()) return undefined;
  return parsed.number;
}
