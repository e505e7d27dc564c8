/**
 * SMS segment counting. A message that fits the GSM 03.38 7-bit alphabet is 160 characters alone or 153 per
 * part (extension characters such as `{` or `€` take two); anything else (Devanagari, emoji, ...) is UCS-2:
 * 70 UTF-16 code units alone or 67 per part. A two-unit character is never split across parts.
 */
const GSM_BASIC = new Set(
  '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà',
);
const GSM_EXTENSION = new Set('^{}\\[~]|€\f');

export type SmsEncoding = 'gsm7' | 'ucs2';

export function smsEncoding(text: string): SmsEncoding {
  for (const ch of text) {
    if (!GSM_BASIC.has(ch) && !GSM_EXTENSION.has(ch)) return 'ucs2';
  }
  return 'gsm7';
}

/** Units per character: GSM septets, or UTF-16 code units for UCS-2 (a surrogate pair is 2). */
function units(text: string, encoding: SmsEncoding): number[] {
  const out: number[] = [];
  for (const ch of text) {
    out.push(encoding === 'gsm7' ? (GSM_EXTENSION.has(ch) ? 2 : 1) : ch.length);
  }
  return out;
}

export function smsSegments(text: string): number {
  const encoding = smsEncoding(text);
  const [single, part] = encoding === 'gsm7' ? [160, 153] : [70, 67];
  const sizes = units(text, encoding);
  const total = sizes.reduce((a, b) => a + b, 0);
  if (total <= single) return 1;
  let parts = 1;
  let used = 0;
  for (const size of sizes) {
    if (used + size > part) {
      parts += 1;
      used = 0;
    }
    used += size;
  }
  return parts;
}
