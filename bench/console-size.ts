// `npm run bench:console-size`: the console's production bundle (dist/console, made by `npm run build`), each
// file's size as served and gzipped (level 9), and the first screen's total: what a phone downloads to open it.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { ensureBuilt } from './server.ts';

ensureBuilt();
const dir = 'dist/console';
let raw = 0;
let gzipped = 0;
for (const name of ['index.html', ...readdirSync(join(dir, 'assets')).map((f) => `assets/${f}`)]) {
  const bytes = readFileSync(join(dir, name));
  const gz = gzipSync(bytes, { level: 9 }).length;
  raw += bytes.length;
  gzipped += gz;
  console.log(
    `${name.padEnd(36)} ${(bytes.length / 1024).toFixed(1).padStart(8)} KB ${(gz / 1024).toFixed(1).padStart(8)} KB gzipped`,
  );
}
console.log(
  `${'first screen, in all'.padEnd(36)} ${(raw / 1024).toFixed(1).padStart(8)} KB ${(gzipped / 1024).toFixed(1).padStart(8)} KB gzipped (aim: under 250 KB)`,
);
