/**
 * Consent keywords of a reply (the contract's fourth part, "An office's first week"): a reply opts out only when
 * its whole text, trimmed, case-folded, with trailing punctuation dropped, is one of the stop words; the start
 * words undo a keyword opt-out. Any longer text is a message, never a keyword: "End of the road near my house
 * has potholes" and "बंद नाली की वजह से गली में पानी भरा है" (a blocked drain) are complaints, not opt-outs.
 * Hindi, for replies typed in Devanagari: बंद ("band", off), रोकें ("rokein", stop), रुको ("ruko", stop) opt out;
 * शुरू ("shuru", start) opts back in.
 */
const STOP_WORDS = new Set(['STOP', 'STOPALL', 'UNSUBSCRIBE', 'CANCEL', 'END', 'QUIT', 'बंद', 'रोकें', 'रुको']);
const START_WORDS = new Set(['START', 'UNSTOP', 'शुरू']);

export type ConsentKeyword = 'stop' | 'start';

/** `stop`, `start`, or null when the reply's whole text is neither. */
export function consentKeyword(body: string): ConsentKeyword | null {
  const text = body
    .normalize('NFC')
    .trim()
    .replace(/[\s.,;:!?।॥'"()-]+$/u, '')
    .toUpperCase();
  if (STOP_WORDS.has(text)) return 'stop';
  if (START_WORDS.has(text)) return 'start';
  return null;
}

/**
 * A data principal's request by reply (the contract's fourth part, `received_via: keyword`): the whole text is
 * ERASE (मिटाएँ, "mitaein") for erasure, MYDATA (मेरा डेटा, "mera data") for a copy of their data.
 */
const PRIVACY_WORDS: Record<string, 'erasure' | 'access'> = {
  ERASE: 'erasure',
  मिटाएँ: 'erasure',
  मिटाएं: 'erasure',
  MYDATA: 'access',
  'MY DATA': 'access',
  'मेरा डेटा': 'access',
};

export function privacyKeyword(body: string): 'erasure' | 'access' | null {
  const text = body
    .normalize('NFC')
    .trim()
    .replace(/[\s.,;:!?।॥'"()-]+$/u, '')
    .replace(/\s+/g, ' ')
    .toUpperCase();
  return PRIVACY_WORDS[text] ?? null;
}
