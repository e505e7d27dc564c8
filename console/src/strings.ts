// Every string of the console, in English and Hindi. `hi` must have every key of `en` (the type checks it).
import { en, type Key } from './strings.en.ts';
import { hi } from './strings.hi.ts';

export type { Key };

export const strings: Record<'en' | 'hi', Record<Key, string>> = { en, hi };
