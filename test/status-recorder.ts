/**
 * Which documented answers the suite reaches. With STATUS_COVERAGE_DIR set, every app the tests build records
 * each answer as `METHOD /path/{param} status` (the route as the API document writes it), once per process, in a
 * file of that process's own in the folder (appended as it is first seen: vitest's workers may be killed, not
 * exit). `npm run status-coverage` (run by
 * .ci/run after both test phases) compares the union with the statuses the document lists for each operation.
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';

const dir = process.env.STATUS_COVERAGE_DIR;
const seen = new Set<string>();

/** `/api/voters/:id` → `/api/voters/{id}`. */
function documentPath(url: string): string {
  return url.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
}

export function recordStatuses(app: FastifyInstance): void {
  if (!dir) return;
  app.addHook('onResponse', (request, reply, done) => {
    const url = request.routeOptions.url;
    if (url) recordStatus(request.method, documentPath(url), reply.statusCode);
    done();
  });
}

/** Records an answer a test attributes to an operation itself (one the router did not match: an empty or over-long id). */
export function recordStatus(method: string, documentedPath: string, status: number): void {
  if (!dir) return;
  const line = `${method} ${documentedPath} ${status}`;
  if (seen.has(line)) return;
  seen.add(line);
  mkdirSync(dir, { recursive: true });
  appendFileSync(join(dir, `${process.pid}.txt`), `${line}\n`);
}
