import { readdirSync, readFileSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.ts';

/**
 * The console's Content-Security-Policy: scripts, styles, fonts, images and API calls from this origin only, no
 * inline script, no framing, no plugins. Downloads (an import's errors, an export) are blob: URLs the page makes.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  // The service worker that keeps the app shell for the field screens offline (console/public/sw.js).
  "worker-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.webmanifest': 'application/manifest+json',
  '.woff2': 'font/woff2',
};

/**
 * Serves the console (the Vite build in `dir`, made by `npm install`) at /console/ from memory: its files are
 * few and small. Hashed assets are cached for a year; every other path under /console/ answers the app's
 * index.html (its router reads the path), never cached. `/` redirects to /console/. Where the build is
 * missing (the TypeScript run from source without `npm run build`), /console/ says how to build it.
 */
export async function consoleRoutes(app: FastifyInstance, { dir }: { dir: string }): Promise<void> {
  const files = new Map<string, Buffer>();
  try {
    for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile()) continue;
      const path = join(entry.parentPath, entry.name);
      files.set(relative(dir, path).split(sep).join('/'), readFileSync(path));
    }
  } catch {
    // No build: answered below.
  }
  const index = files.get('index.html');
  const route = { config: { permission: 'public' as const }, schema: { hide: true } };

  app.get('/', route, async (_request, reply) => reply.redirect('/console/', 302));
  // `/console` and `/console/` are one route (the router ignores a trailing slash); `/console/*` the rest.
  const serve = async (request: FastifyRequest<{ Params: { '*'?: string } }>, reply: FastifyReply) => {
    const path = request.params['*'] ?? '';
    reply.header('content-security-policy', CONSOLE_CSP);
    reply.header('referrer-policy', 'no-referrer');
    reply.header('cross-origin-opener-policy', 'same-origin');
    const file = files.get(path);
    if (file && path !== 'index.html') {
      if (path.startsWith('assets/')) reply.header('cache-control', 'public, max-age=31536000, immutable');
      return reply.type(TYPES[extname(path)] ?? 'application/octet-stream').send(file);
    }
    if (path.startsWith('assets/')) throw new AppError('not_found', `No console file ${path}.`);
    if (!index)
      throw new AppError(
        'service_unavailable',
        'The console is not built: run `npm run build` (npm install runs it), then restart.',
      );
    return reply.type(TYPES['.html']!).send(index);
  };
  app.get('/console', route, serve);
  app.get('/console/*', route, serve);
}
