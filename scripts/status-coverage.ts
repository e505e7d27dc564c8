// `npm run status-coverage -- <folder>`: the documented answers the test suite never reached. The suite, run
// with STATUS_COVERAGE_DIR=<folder> (test/status-recorder.ts), writes each `METHOD /path status` its apps
// answered; this lists every status the API document gives an operation that no test saw, and exits non-zero
// when there is one. .ci/run runs it after both test phases (their union: SQLite on Node 20, PostgreSQL on
// Node 24), so a status documented and never produced, or produced and never tested, fails CI; so does an
// answer a test saw that the document does not give its operation.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { connect } from '../src/db/connect.ts';
import { migrateToLatest } from '../src/db/migrate.ts';

type Paths = Record<string, Record<string, { responses?: Record<string, unknown> }>>;

/** `METHOD /path status` for each status the served document lists. */
async function documented(): Promise<string[]> {
  const config = loadConfig({ DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'silent', QUIET_HOURS: '' });
  const db = connect(config.databaseUrl, config.database);
  try {
    await migrateToLatest(db);
    const app = await buildApp({ config, db });
    try {
      const doc = (await app.inject({ method: 'GET', url: '/api/openapi.json' })).json() as { paths: Paths };
      return Object.entries(doc.paths).flatMap(([path, item]) =>
        Object.entries(item).flatMap(([method, op]) =>
          Object.keys(op.responses ?? {}).map((status) => `${method.toUpperCase()} ${path} ${status}`),
        ),
      );
    } finally {
      await app.close();
    }
  } finally {
    await db.close();
  }
}

const dir = process.argv[2] ?? process.env.STATUS_COVERAGE_DIR;
if (!dir) {
  console.error('status-coverage: name the folder the suite wrote (STATUS_COVERAGE_DIR)');
  process.exit(2);
}
const seen = new Set(
  readdirSync(dir).flatMap((file) => readFileSync(join(dir, file), 'utf8').split('\n').filter(Boolean)),
);
const all = await documented();
const missing = all.filter((line) => !seen.has(line));
// An answer the document does not give its operation (an operation the document names: not the hidden routes).
const operations = new Set(all.map((line) => line.slice(0, line.lastIndexOf(' '))));
const listed = new Set(all);
const undocumented = [...seen].filter(
  (line) => operations.has(line.slice(0, line.lastIndexOf(' '))) && !listed.has(line),
);
console.log(`status-coverage: ${all.length - missing.length} of ${all.length} documented answers reached`);
for (const line of missing) console.log(`  never reached: ${line}`);
for (const line of undocumented.sort()) console.log(`  answered, not documented: ${line}`);
process.exit(missing.length || undocumented.length ? 1 : 0);
