import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { adapters } from '../src/providers/registry.ts';

/**
 * Everything the service knows about a provider lives in its module, `src/providers/<name>/`: no other file of
 * the service or the console names a provider, except the registry that lists them (src/providers/registry.ts),
 * the migrations (history, never edited) and the console's generated API types. The sandbox is exempt: "the
 * sandbox" is the contract's name for the default that reaches no one, used as such across the service.
 */
const root = new URL('..', import.meta.url).pathname;

function files(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return files(path);
    return /\.(ts|tsx)$/.test(entry.name) ? [path] : [];
  });
}

describe('provider names', () => {
  const named = adapters.filter((a) => !a.simulated);
  const words = named.flatMap((a) => [a.name, a.label]);
  const pattern = new RegExp(
    `\\b(${words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')})\\b`,
    'i',
  );
  const exempt = (path: string) =>
    named.some((a) => path.startsWith(`src/providers/${a.name}/`)) ||
    path === 'src/providers/registry.ts' ||
    path.startsWith('src/db/migrations/') ||
    path === 'console/src/schema.d.ts';

  /** The lines of the service and the console, outside the exempt files, that `re` finds: `path:line: text`. */
  const linesOutsideProviders = (re: RegExp) =>
    [...files('src'), ...files('console/src')]
      .filter((path) => !exempt(path))
      .flatMap((path) =>
        readFileSync(join(root, path), 'utf8')
          .split('\n')
          .map((line, i) => [line, i] as const)
          .filter(([line]) => re.test(line))
          .map(([line, i]) => `${relative(root, join(root, path))}:${i + 1}: ${line.trim()}`),
      );

  it('the scan finds the provider modules (it is not empty)', () => {
    const all = [...files('src'), ...files('console/src')];
    expect(all.length).toBeGreaterThan(100);
    expect(
      all.filter((p) => exempt(p) && pattern.test(readFileSync(join(root, p), 'utf8'))).length,
    ).toBeGreaterThan(named.length);
  });

  it('no file outside src/providers/<name>/ and the registry names a provider', () => {
    expect(linesOutsideProviders(pattern)).toEqual([]);
  });

  // The providers' own wire fields (call ids, a webhook's challenge, status fields, signature headers, their
  // answer formats): only the provider's adapter reads or writes them, so a route or service names none.
  const fields =
    /\b(CallSid|CustomField|SmsSid|CallFrom|MessageSid|DetailedStatus|gather_prompt|max_input_digits|TwiML|X-Hub-Signature(-256)?|X-Twilio-Signature)\b|\bhub\.(mode|verify_token|challenge)\b/;

  it('the field scan finds the adapters that read those fields (it is not empty)', () => {
    const adapters_ = files('src/providers').filter((p) => fields.test(readFileSync(join(root, p), 'utf8')));
    expect(adapters_.length).toBeGreaterThanOrEqual(3);
  });

  it("no file outside src/providers/<name>/ names a provider's fields", () => {
    expect(linesOutsideProviders(fields)).toEqual([]);
  });
});
