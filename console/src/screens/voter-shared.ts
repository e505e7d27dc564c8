// What the voter screens share: the gender, relation and support words, the custom fields, comma lists.
import { useQuery } from '@tanstack/react-query';
import { api, data } from '../api.ts';

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

export type FieldDef = {
  key: string;
  label: string;
  type: 'text' | 'number' | 'date' | 'choice' | 'boolean';
  choices: string[] | null;
  sensitive: boolean;
};

/** The workspace's custom voter fields (everyone reads them). */
export function useVoterFields() {
  return useQuery({
    queryKey: ['voter-fields'],
    queryFn: () => data(api.GET('/api/voter-fields')) as Promise<FieldDef[]>,
    // Read again on every screen that shows them: a field another member (or the API) added meanwhile shows.
    staleTime: 0,
  });
}
