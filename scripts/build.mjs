// `npm run build` (also run by `npm install` through `prepare`): compiles src/ to dist/ with tsc, copies the
// files read at run time that are not TypeScript (the common-passwords list, the export threads' entry), and
// builds the console (console/, with Vite) into dist/console.
// Plain Node.js so that it runs the same on every shell, Windows included.
import { spawnSync } from 'node:child_process';
import { cpSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(root, 'src');
const dist = join(root, 'dist');

let tsc;
try {
  tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
} catch {
  // `npm ci --omit=dev` (a production image's last stage) runs `prepare` too, without TypeScript: dist/ then
  // comes from the stage that built it, so this is not an error; `npm start` says so if dist/ is missing.
  console.warn(
    'build: skipped: TypeScript is not installed (devDependencies omitted); dist/ must be built elsewhere',
  );
  process.exit(0);
}

rmSync(dist, { recursive: true, force: true });
const compiled = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], {
  stdio: 'inherit',
});
if (compiled.status !== 0) process.exit(compiled.status ?? 1);

for (const entry of readdirSync(src, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || entry.name.endsWith('.ts')) continue;
  const from = join(entry.parentPath, entry.name);
  cpSync(from, join(dist, relative(src, from)));
}

// The console (console/, a Vite build) into dist/console, which the service serves at /console/.
const vite = join(dirname(createRequire(import.meta.url).resolve('vite/package.json')), 'bin', 'vite.js');
const built = spawnSync(process.execPath, [vite, 'build', '-c', join(root, 'console', 'vite.config.ts')], {
  stdio: 'inherit',
  cwd: root,
});
if (built.status !== 0) process.exit(built.status ?? 1);
console.log(`build: ${relative(process.cwd(), dist) || dist} is ready, with the console in dist/console`);
