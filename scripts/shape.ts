/**
 * The code's shape, as issue 54 measures it: hand-written source files over 500 lines, functions of 80 lines or
 * more, file-level import circles (type imports included), and the modules' knot (the largest set of modules that
 * import one another in a circle). `npx tsx scripts/shape.ts` prints them; `--json` prints them as JSON.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import ts from 'typescript';

const root = join(import.meta.dirname, '..');

function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && /\.(ts|tsx)$/.test(e.name) && !e.name.endsWith('.d.ts'))
    .map((e) => relative(root, join(e.parentPath, e.name)))
    .filter((f) => !f.includes('generated') && !f.includes('node_modules'));
}

const files = [...sources('src'), ...sources('console/src')];

export function longFiles(limit = 500) {
  return files
    .map((f) => ({ file: f, lines: readFileSync(join(root, f), 'utf8').split('\n').length }))
    .filter((x) => x.lines > limit)
    .sort((a, b) => b.lines - a.lines);
}

/**
 * Functions of `limit` lines or more. `lines` is the whole function; `own` leaves out the functions nested in it
 * (a route plugin's handlers, a component's callbacks), each of which is measured as a function of its own.
 */
export function longFunctions(limit = 80) {
  const out: { file: string; name: string; lines: number; own: number }[] = [];
  for (const f of files) {
    const text = readFileSync(join(root, f), 'utf8');
    const sf = ts.createSourceFile(
      f,
      text,
      ts.ScriptTarget.Latest,
      true,
      f.endsWith('x') ? ts.ScriptKind.TSX : ts.ScriptKind.TS,
    );
    const visit = (node: ts.Node) => {
      if (ts.isFunctionLike(node) && 'body' in node && node.body) {
        const start = sf.getLineAndCharacterOfPosition(node.getStart()).line;
        const end = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
        const lines = end - start + 1;
        let nested = 0;
        const inner = (child: ts.Node) => {
          if (ts.isFunctionLike(child) && 'body' in child && child.body) {
            nested +=
              sf.getLineAndCharacterOfPosition(child.getEnd()).line -
              sf.getLineAndCharacterOfPosition(child.getStart()).line +
              1;
            return;
          }
          ts.forEachChild(child, inner);
        };
        ts.forEachChild(node.body, inner);
        if (lines >= limit) {
          const named =
            (node as ts.FunctionDeclaration).name?.getText() ??
            (ts.isVariableDeclaration(node.parent)
              ? node.parent.name.getText()
              : ts.isPropertyAssignment(node.parent)
                ? node.parent.name.getText()
                : `<${ts.SyntaxKind[node.kind]}@${start + 1}>`);
          out.push({ file: f, name: named, lines, own: lines - nested });
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return out.sort((a, b) => b.lines - a.lines);
}

function resolve(from: string, spec: string): string | undefined {
  const base = normalize(join(dirname(from), spec)).replace(/\.js$/, '');
  for (const candidate of [base + '.ts', base + '.tsx', join(base, 'index.ts'), base])
    if (files.includes(candidate)) return candidate;
  return undefined;
}

export function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const f of files) {
    const text = readFileSync(join(root, f), 'utf8');
    const targets = [...text.matchAll(/(?:from\s*|import\s*\(\s*)['"](\.{1,2}\/[^'"]+)['"]/g)]
      .map((m) => resolve(f, m[1]!))
      .filter((t): t is string => !!t);
    graph.set(f, [...new Set(targets)]);
  }
  return graph;
}

/** Tarjan's strongly connected components of size > 1. */
export function circles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const idx = new Map<string, number>(),
    low = new Map<string, number>(),
    on = new Set<string>();
  const stack: string[] = [],
    out: string[][] = [];
  const strong = (v: string) => {
    idx.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const c: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        on.delete(w);
        c.push(w);
      } while (w !== v);
      if (c.length > 1) out.push(c.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) strong(v);
  return out;
}

export function moduleGraph(graph: Map<string, string[]>): Map<string, string[]> {
  const of = (f: string) => /^src\/modules\/([^/]+)\//.exec(f)?.[1];
  const out = new Map<string, Set<string>>();
  for (const [f, ts_] of graph) {
    const a = of(f);
    if (!a) continue;
    if (!out.has(a)) out.set(a, new Set());
    for (const t of ts_) {
      const b = of(t);
      if (b && b !== a) out.get(a)!.add(b);
    }
  }
  return new Map([...out].map(([k, v]) => [k, [...v]]));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const graph = importGraph();
  const modules = moduleGraph(graph);
  const result = {
    files: files.length,
    longFiles: longFiles(),
    longFunctions: longFunctions(),
    fileCircles: circles(graph),
    moduleKnots: circles(modules),
    modules: modules.size,
  };
  if (process.argv.includes('--json')) console.log(JSON.stringify(result, null, 2));
  else {
    console.log(`files over 500 lines: ${result.longFiles.length}`);
    for (const x of result.longFiles) console.log(`  ${x.lines}  ${x.file}`);
    const ownLong = result.longFunctions.filter((x) => x.own >= 80).length;
    console.log(
      `functions of 80 lines or more: ${result.longFunctions.length} (${ownLong} without the functions nested in them)`,
    );
    console.log('  lines  own  file  function');
    for (const x of result.longFunctions) console.log(`  ${x.lines}  ${x.own}  ${x.file}  ${x.name}`);
    console.log(`file-level import circles: ${result.fileCircles.length}`);
    for (const c of result.fileCircles) console.log(`  ${c.join(' <-> ')}`);
    console.log(
      `module knots (of ${result.modules} modules): ${result.moduleKnots.map((k) => k.length).join(', ')}`,
    );
    for (const k of result.moduleKnots) console.log(`  ${k.join(', ')}`);
  }
}
