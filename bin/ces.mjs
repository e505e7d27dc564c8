#!/usr/bin/env node
// `npx ces ...`: the operator CLI. Runs the build (dist/cli.js, made by `npm run build` and by `npm install`
// through `prepare`); in a checkout that was never built, it runs the TypeScript through tsx's loader.
import { existsSync } from 'node:fs';

const compiled = new URL('../dist/cli.js', import.meta.url);
if (existsSync(compiled)) {
  await import(compiled.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli.ts');
}
