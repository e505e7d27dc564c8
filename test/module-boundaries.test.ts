/**
 * A module imports another module's files only from what that module offers the others, as the table in
 * docs/architecture.md ("Modules and what each offers the others") lists them; http/, providers/, lib/, db/ and
 * the domain import no module at all.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const modulesDir = join(root, 'src', 'modules');

/** module -> the files it offers the others, read from the table in docs/architecture.md. */
function offered(): Map<string, Set<string>> {
  const doc = readFileSync(join(root, 'docs', 'architecture.md'), 'utf8');
  const section =
    doc.split('## Modules and what each offers the others')[1]?.split('\n### ')[0]?.split('\n## ')[0] ?? '';
  const table = new Map<string, Set<string>>();
  for (const line of section.split('\n')) {
    const row = /^\|\s*`([a-z-]+)`\s*\|(.*)\|\s*$/.exec(line);
    if (row) table.set(row[1]!, new Set([...row[2]!.matchAll(/`([\w.-]+\.ts)`/g)].map((m) => m[1]!)));
  }
  return table;
}

/** module -> the modules it may import, read from the table in docs/architecture.md ("Which modules each ..."). */
function declaredImports(): Map<string, Set<string>> {
  const doc = readFileSync(join(root, 'docs', 'architecture.md'), 'utf8');
  const section = doc.split('### Which modules each module imports')[1]?.split('\n### ')[0] ?? '';
  const table = new Map<string, Set<string>>();
  for (const line of section.split('\n')) {
    const row = /^\|\s*`([a-z-]+)`\s*\|(.*)\|\s*$/.exec(line);
    if (row) table.set(row[1]!, new Set([...row[2]!.matchAll(/`([a-z-]+)`/g)].map((m) => m[1]!)));
  }
  return table;
}

/** Every .ts file under `dir`, as paths relative to the repository. */
function sources(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && /\.(ts|mjs)$/.test(entry.name))
    .map((entry) => relative(root, join(entry.parentPath, entry.name)));
}

/** The repository-relative files a source imports (static, `import type` and dynamic), relative ones only. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  return [...text.matchAll(/(?:from\s*|import\s*\(\s*)['"](\.{1,2}\/[^'"]+)['"]/g)].map((m) =>
    normalize(join(dirname(file), m[1]!)),
  );
}

const moduleOf = (file: string) => /^src\/modules\/([^/]+)\//.exec(file)?.[1];

describe('module boundaries', () => {
  const table = offered();
  const modules = readdirSync(modulesDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name);

  it('the table in docs/architecture.md names every module once, and only files that exist', () => {
    expect([...table.keys()].sort()).toEqual([...modules].sort());
    for (const [module, files] of table)
      for (const file of files)
        expect(existsSync(join(modulesDir, module, file)), `${module}/${file}`).toBe(true);
  });

  it("no module imports another module's files except those it offers", () => {
    const breaches: string[] = [];
    for (const file of sources(modulesDir)) {
      const from = moduleOf(file)!;
      for (const target of importsOf(file)) {
        const to = moduleOf(target);
        if (!to || to === from) continue;
        const name = target.split('/').pop()!;
        if (!table.get(to)?.has(name)) breaches.push(`${file} imports ${target}`);
      }
    }
    expect(breaches).toEqual([]);
  });

  it('each module imports just the modules its row in docs/architecture.md names, and each of them', () => {
    const declared = declaredImports();
    expect([...declared.keys()].sort()).toEqual([...modules].sort());
    const actual = new Map(modules.map((m) => [m, new Set<string>()]));
    for (const file of sources(modulesDir)) {
      const from = moduleOf(file)!;
      for (const target of importsOf(file)) {
        const to = moduleOf(target);
        if (to && to !== from) actual.get(from)!.add(to);
      }
    }
    const undeclared: string[] = [];
    const stale: string[] = [];
    for (const [from, tos] of actual) {
      for (const to of tos) if (!declared.get(from)?.has(to)) undeclared.push(`${from} -> ${to}`);
      for (const to of declared.get(from) ?? []) if (!tos.has(to)) stale.push(`${from} -> ${to}`);
    }
    expect({ undeclared, stale }).toEqual({ undeclared: [], stale: [] });
  });

  it('http/, providers/, lib/, db/ and domain.ts import no module', () => {
    const breaches: string[] = [];
    const files = ['http', 'providers', 'lib', 'db']
      .flatMap((dir) => sources(join(root, 'src', dir)))
      .concat('src/domain.ts');
    for (const file of files)
      for (const target of importsOf(file)) if (moduleOf(target)) breaches.push(`${file} imports ${target}`);
    expect(breaches).toEqual([]);
  });

  it('the check sees an import it must refuse', () => {
    // The detector itself: a route file of campaigns is no module's offer.
    expect(table.get('campaigns')?.has('campaigns.routes.ts')).toBe(false);
    expect(importsOf('src/modules/sending/preview.routes.ts').some((t) => moduleOf(t) === 'campaigns')).toBe(
      true,
    );
  });
});
