import { hash, verify } from '@node-rs/argon2';
import { readFileSync } from 'node:fs';

// Algorithm.Argon2id of @node-rs/argon2 (an ambient const enum, which isolated modules cannot read).
const ARGON2ID = 2;

// OWASP's argon2id recommendation: m=19 MiB, t=2, p=1.
const options = { algorithm: ARGON2ID, memoryCost: 19456, timeCost: 2, parallelism: 1 } as const;

export function hashPassword(password: string): Promise<string> {
  return hash(password, options);
}

export async function verifyPassword(passwordHash: string, password: string): Promise<boolean> {
  try {
    return await verify(passwordHash, password);
  } catch {
    return false;
  }
}

/** A real hash to verify against when the account does not exist, so that both paths take as long. */
let decoy: Promise<string> | undefined;
export async function verifyDecoy(password: string): Promise<false> {
  decoy ??= hash('decoy password that matches nothing', options);
  await verifyPassword(await decoy, password);
  return false;
}

export const PASSWORD_MIN_LENGTH = 8;

let common: Set<string> | undefined;
/** The shipped list of commonly used passwords (read once, on first use; no network). */
function commonPasswords(): Set<string> {
  common ??= new Set(
    readFileSync(new URL('./common-passwords.txt', import.meta.url), 'utf8')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#')),
  );
  return common;
}

const fold = (value: string) => value.normalize('NFKC').toLowerCase().replace(/\s+/g, ' ').trim();

/**
 * Why a new password is too weak, in words that tell the caller what to do, or undefined when it will do:
 * at least 8 characters besides surrounding spaces, not one character repeated, not among the 10,000 most
 * common passwords, and not the account's own email (or its part before @), phone or name.
 */
export function passwordProblem(
  password: string,
  account: { email?: string | undefined; phone?: string | undefined; name?: string | undefined },
): string | undefined {
  const folded = fold(password);
  if ([...folded].length < PASSWORD_MIN_LENGTH)
    return `must have at least ${PASSWORD_MIN_LENGTH} characters besides spaces at either end.`;
  if (new Set(folded.replace(/ /g, '')).size === 1)
    return 'must not be one character repeated; choose a phrase that others would not guess.';
  if (commonPasswords().has(folded) || commonPasswords().has(folded.replace(/ /g, '')))
    return 'is one of the most commonly used passwords; choose a phrase that others would not guess.';
  const email = account.email ? fold(account.email) : undefined;
  if (email && (folded === email || folded === email.split('@')[0])) return 'must not be your email address.';
  const digits = folded.replace(/[\s()+.-]/g, '');
  const phone = account.phone?.replace(/\D/g, '');
  if (phone && /^\d+$/.test(digits) && digits.length >= 6 && phone.endsWith(digits))
    return 'must not be your phone number.';
  const name = account.name ? fold(account.name) : undefined;
  if (name && (folded === name || folded.replace(/ /g, '') === name.replace(/ /g, '')))
    return 'must not be your name.';
  return undefined;
}
