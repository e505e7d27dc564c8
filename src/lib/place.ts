/**
 * One normalisation for place names (constituency, booth, ward), used wherever they are stored or compared:
 * voters (created, updated, imported), voter filters, segments, silence periods and the campaign preview. Rolls
 * are messy: `North  Delhi` (two spaces), `North\u00a0Delhi` (a no-break space) and `North Delhi\u200b` (a
 * zero-width space) are one constituency, and a silence period for "North Delhi" must hold for all of them.
 *
 * - `placeText`: Unicode NFKC (compatibility forms such as full-width letters become the plain ones), format
 *   characters (zero-width spaces and joiners, the BOM, soft hyphens, bidi marks) dropped, every run of
 *   whitespace of any kind one space, trimmed. What is stored and shown.
 * - `placeKey`: `placeText`, case-folded: what is compared (voters.constituency_key, silence periods' keys,
 *   filters on constituency).
 */
export function placeText(value: string): string {
  // Printable ASCII without a double space: only the ends can change (most rows of a roll).
  if (PLAIN.test(value) && !value.includes('  ')) return value.trim();
  return value.normalize('NFKC').replace(INVISIBLE, '').replace(SPACES, ' ').trim();
}

export function placeKey(value: string): string {
  return placeText(value).toLowerCase();
}

const PLAIN = /^[\x20-\x7e]*$/;
/** Unicode format characters (category Cf): zero-width space/joiners, BOM, soft hyphen, bidi controls. */
const INVISIBLE = /\p{Cf}/gu;
/** Any whitespace, Unicode's included (no-break, ideographic, line and paragraph separators...). */
const SPACES = /[\s\p{Zs}]+/gu;

/** The place kinds a voter has, and the column that holds each one's key. */
export const placeKinds = ['constituency', 'ward', 'booth'] as const;
export type PlaceKind = (typeof placeKinds)[number];

/**
 * The key columns (`constituency_key`, `ward_key`, `booth_key`) for the place fields given: each field given
 * (null or empty: no place) gets its key; a field not given is left out, so an update keeps its key.
 */
export function placeKeyColumns(values: Partial<Record<PlaceKind, string | null | undefined>>) {
  const keys: Partial<Record<`${PlaceKind}_key`, string | null>> = {};
  for (const kind of placeKinds) {
    const value = values[kind];
    if (value !== undefined) keys[`${kind}_key`] = value ? placeKey(value) : null;
  }
  return keys;
}
