/**
 * Consent keywords of a reply, read from its first word (any case). The English set is the contract's (and
 * the carriers' usual one). Hindi, for replies typed in Devanagari: बंद ("band", off / closed, the word an
 * Indian subscriber uses for "switch it off"), रोको / रोकें ("roko" / "rokein", stop) opt out; शुरू ("shuru",
 * start) opts back in. Romanised "BAND" is left out: it is also an ordinary English word.
 */
const STOP_WORDS = new Set(['STOP', 'STOPALL', 'UNSUBSCRIBE', 'CANCEL', 'END', 'QUIT', 'बंद', 'रोको', 'रोकें']);
const START_WORDS = new Set(['START', 'UNSTOP', 'शुरू']);

export type ConsentKeyword = 'stop' | 'start';

/** `stop`, `start`, or null when the reply's first word is neither. */
export function consentKeyword(body: string): ConsentKeyword | null {
  const first = body
    .trim()
    .split(/[\s.,;:!?।]+/u, 1)[0]
    ?.normalize('NFC')
    .toUpperCase();
  if (!first) return null;
  if (STOP_WORDS.has(first)) return 'stop';
  if (START_WORDS.has(first)) return 'start';
  return null;
}
