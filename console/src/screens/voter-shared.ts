// What the voter screens share: the gender, relation and support words, the custom fields, comma lists.
import { useQuery } from '@tanstack/react-query';
import { queries } from '../queries.ts';

export const genders = ['male', 'female', 'third_gender'] as const;
export const relations = ['father', 'mother', 'husband', 'wife', 'other'] as const;
/** Support levels, 1 (strong) to 5. */
export const levels = ['1', '2', '3', '4', '5'] as const;

/** "a, b,, c" as ["a", "b", "c"]. */
export function commaList(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

export type { FieldDef } from '../queries.ts';

/** The workspace's custom voter fields (everyone reads them). */
export function useVoterFields() {
  return useQuery(queries.voterFields());
}
